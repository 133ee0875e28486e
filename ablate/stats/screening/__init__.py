"""Screening: which fraction of the grid to measure first, and the factorial model of what it measured."""

"""Counted nouns in the sentences ablate prints: "1 block", "2 blocks"."""
from __future__ import annotations


def count(n: float, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, plural unless `n` is one; `plural` where adding an s is wrong. Whole numbers print as
    such (a float count from a metric included); others with the digits they have."""
    shown = f"{n:,.0f}" if float(n).is_integer() else f"{n:g}"
    return f"{shown} {noun if n == 1 else plural or noun + 's'}"

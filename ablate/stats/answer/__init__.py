"""The answer: each combination against the baseline, the recommendation and what else the study found."""

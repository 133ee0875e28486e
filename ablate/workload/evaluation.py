"""How many held-out samples a training for accuracy evaluates, and which ones.

Why not the whole test split: accuracy parity compares two models on the same examples, so what the test split's
size buys is a small sampling error of a *paired difference*, and that error only has to be small against the
study's accuracy tolerance. A library language model's 50,257-word head made the whole split the larger part of a
study (benchmarks/studies/gpt2_item8.yaml: about two minutes an evaluation, for seconds of training); a subsample
of the size the decision needs costs that much less, in proportion.

The rule. Two models that disagree on a share d of the predictions have a paired accuracy difference whose
standard error on n independent predictions is at most sqrt(d / n) (McNemar: the difference is the mean of a
variable that is +1, -1 or 0, and 0 wherever they agree). The study evaluates enough samples that this is at
most `SE_SHARE` (a quarter) of the tolerance, under a conservative `DISAGREEMENT` (a half: two models of 75%
accuracy each disagree on at most half the examples, since they can disagree only where one is wrong): n =
d / (tolerance / 4)^2 predictions, capped at the split's size. A text window holds many predictions, which
are not independent: a window of k counts as k / (1 + (k - 1) rho) independent ones (the design effect of a
cluster sample), rho the within-window correlation `WITHIN_WINDOW` (above what was measured: docs/evidence.md).
An image is one prediction. A loss function's task has no accuracy to size against: it evaluates the whole split.

Paired: the subsample is one fixed draw for the whole run - every group, combination and training seed evaluates
the same indices - from a seed the run fixes (its training seed, not a parity seed's), so the examples' difficulty
cancels in every paired difference. Another run draws another subsample, as it draws other seeds
(`ablate.store.seeds`), so two runs stay independent.

`budget.eval_samples` sets the size (a number of test samples), or `full` for the whole split.
"""
from __future__ import annotations

import math
import random
from typing import Sequence

from torch.utils.data import Dataset, Subset

FULL = "full"  # budget.eval_samples: the whole test split
DISAGREEMENT = 0.5  # the share of predictions two compared models disagree on, at most, as the rule assumes
SE_SHARE = 0.25  # the paired difference's standard error, as a share of the accuracy tolerance
# The correlation of paired disagreements within one text window: measured -0.003 to 0.004 (95% intervals up to
# 0.0055) for byte-level and GPT-2 models on kjv (benchmarks/within_window.py; docs/evidence.md), taken about four
# times the highest interval's end to be safe.
WITHIN_WINDOW = 0.02


def independent_predictions(predictions: int) -> float:
    """What one sample of `predictions` correlated predictions is worth in independent ones (its design effect)."""
    return predictions / (1 + (predictions - 1) * WITHIN_WINDOW)


def needed(tolerance: float, predictions: int) -> float:
    """Test samples that bring the paired difference's standard error to `SE_SHARE` of `tolerance` (points);
    infinite for a tolerance of 0."""
    if tolerance <= 0:
        return math.inf
    return DISAGREEMENT / (SE_SHARE * tolerance / 100) ** 2 / independent_predictions(predictions)


def sample_size(setting: int | str | None, split: int, tolerance: float, predictions: int,
                has_accuracy: bool) -> int:
    """How many of the split's `split` samples to evaluate: the study's `setting` (a number, or `FULL`), else the
    rule (module docstring) at the study's accuracy `tolerance` in points, for samples of `predictions` each."""
    if setting == FULL or (setting is None and not has_accuracy):
        return split
    if isinstance(setting, int):
        return min(setting, split)
    wanted = needed(tolerance, predictions)
    return split if wanted >= split else math.ceil(wanted)


def sampling_error(tested: int, predictions: int) -> float:
    """The paired accuracy difference's standard error on `tested` samples, at most (points, under `DISAGREEMENT`)."""
    return 100 * math.sqrt(DISAGREEMENT / (tested * independent_predictions(predictions)))


def indices(split: int, tested: int, seed: int) -> Sequence[int]:
    """The `tested` indices of a split of `split` samples that `seed` draws, in order (all of them where
    `tested` covers the split). The same seed draws the same indices in every process and Python version."""
    if tested >= split:
        return range(split)
    return sorted(random.Random(f"ablate evaluation {seed}").sample(range(split), tested))


def subsample(dataset: Dataset, tested: int, seed: int) -> Dataset:
    """The test split's samples that a training for accuracy evaluates (`indices`)."""
    split = len(dataset)  # type: ignore[arg-type]  # every split here is a sized dataset
    return dataset if tested >= split else Subset(dataset, indices(split, tested, seed))


def describe(tested: int, split: int, error: float | None) -> str:
    """The evaluation in words, for reports: "accuracy on 1,270 of 6,881 test samples (...), +-0.25 points"."""
    which = (f"all {split:,} test samples" if tested >= split else
             f"{tested:,} of {split:,} test samples (one random subsample, the same for every group and seed)")
    return f"accuracy on {which}" + (f", +-{error:.2f} points sampling error (a paired difference's standard "
                                     "error, at most)" if error is not None else "")

"""How correlated are two models' paired disagreements within one text window? (issue 47)

    python -m benchmarks.within_window --study PATH [--pairs lr seed amp] [--windows 1000] [--json PATH]

Why measure it: `ablate.workload.evaluation` sizes a language model's held-out subsample by counting a window of
k predictions as k / (1 + (k - 1) rho) independent ones, with rho = `WITHIN_WINDOW`. The one figure behind it
came from a well-trained byte-level model (docs/measuring.md, "Evaluation sized to the decision"). A study that
trains a few dozen steps (benchmarks/studies/gpt2_item8.yaml: 32) leaves models close to unigram predictors,
whose disagreements might cluster in a window far more; this measures rho on such a study before the constant
changes.

Method. The study's baseline (its first choice in every dimension) is trained at its own budget through ablate's
own set-up and loop (`ablate.trial.process.set_up`, `ablate.trial.loop.train`): the study's data, model, task,
optimizer, learning rate, batch size and gradient clipping, for `train_samples` samples - the point at which a
trial evaluates accuracy. Each pair sets it against one variant: `lr` the same seed at 1.1 times the learning
rate, `seed` the next seed (other initial weights and batch order), `amp` the same seed under the study's bf16
autocast choice (the comparison the study makes). Both models of a pair are scored on the same held-out windows
(`--windows` of the test split, drawn as `ablate.workload.evaluation.indices` draws a run's subsample), one
prediction at a time: argmax against target over exactly the positions the task's accuracy counts (the task's
own logits and targets). Per pair, D = right_A - right_B at each position (+1, -1 or 0) gives:

- d, the share of positions where the two disagree (D != 0);
- the design effect deff = Var(window sums of D) / (k Var(D)), k predictions a window, and rho = (deff - 1) /
  (k - 1), with a 95% percentile interval from a bootstrap over windows (`DRAWS` resamples);
- the paired accuracy difference's standard error as measured (SD of the window means / sqrt(windows), points),
  against `ablate.workload.evaluation.sampling_error` for as many windows (the rule's bound, d = 0.5), and that
  bound at the measured d (the rule's rho alone at work).

Nothing here is timed: it is a statistics measurement, whose figures move from machine to machine only as the
trainings' numerics do.

What it found (2-core Xeon, bf40c14; rho with its 95% interval). gpt2_item8 at its own 32 steps: every model
predicts the space (or once in a while another byte that is never right), so d = 0 in all three pairs on 1,000
windows: the paired difference is exactly 0 and rho is undefined. At 128 steps (2,048 samples, 500 windows), the
pairs disagree on 0.8-4.8% with rho -0.0032 [-0.0047, -0.0016] (seed), -0.0021 [-0.0038, -0.0003] (lr) and -0.0005
[-0.0026, 0.0015] (bf16): disagreements within a window cancel rather than cluster. byte_gpt (2 layers, 64 wide,
64-byte windows, lr 4e-3, 1,000 windows) after 400 steps: d 0.10-0.15 and rho 0.0019-0.0029 (upper ends
0.0035-0.0045); after 100 steps, with one model of the pair still guessing spaces, d 0.16 and rho 0.0037 [0.0021,
0.0055], the highest seen; after 32 steps d is 0.0001. So rho stayed under a quarter of `WITHIN_WINDOW` throughout,
and the measured standard errors (0.05-0.17 points) under half the rule's bound for as many windows (0.42 points
for 1,000, 0.60 for 500).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from ablate.config import study as studies
from ablate.config.choices import Option
from ablate.config.design import CONFIDENCE
from ablate.config.study import Study
from ablate.workload import evaluation

DRAWS = 2_000  # bootstrap resamples of the windows
LR_FACTOR = 1.1  # the `lr` pair: a learning rate this many times the study's, as the first measurement did
PAIRS = ("lr", "seed", "amp")
WINDOWS = 1_000  # held-out windows scored, where the split has as many


@dataclass(frozen=True)
class Clustering:
    """Two models' paired disagreements on the same windows, and how much they cluster within a window."""

    windows: int
    per_window: int  # k: predictions a window
    disagreement: float  # d: the share of predictions where exactly one of the two is right
    difference: float  # accuracy of A minus accuracy of B, points
    deff: float  # design effect (nan where the two never disagree)
    rho: float
    rho_low: float
    rho_high: float
    se: float  # the paired difference's standard error as measured, points

    @property
    def bound(self) -> float:
        """`ablate.workload.evaluation.sampling_error` for these windows: the rule's bound (d = 0.5)."""
        return evaluation.sampling_error(self.windows, self.per_window)

    @property
    def bound_at_d(self) -> float:
        """The rule's bound at the measured d instead of its 0.5: what its rho alone allows."""
        return self.bound * math.sqrt(self.disagreement / evaluation.DISAGREEMENT)


def _deff(sums: np.ndarray, squares: np.ndarray, k: int) -> np.ndarray:
    """Design effects from per-window sums of D and of D^2, along the last axis (one row per resample).

    Var(D) is over every prediction, Var(window sums) over windows, both with n - 1: the same sums serve the
    measurement and each bootstrap resample, so the 2,000 resamples cost two gathers, not 2,000 passes.
    """
    n = sums.shape[-1]
    total, predictions = sums.sum(-1), n * k
    var_d = (squares.sum(-1) - total**2 / predictions) / (predictions - 1)
    var_sums = ((sums**2).sum(-1) - total**2 / n) / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return var_sums / (k * var_d)


def clustering(diffs: np.ndarray, draws: int = DRAWS, seed: int = 0) -> Clustering:
    """`Clustering` of paired differences `diffs`, shape (windows, k): right_A - right_B, or any per-prediction
    variable whose within-window correlation is wanted (the tests give it a known one)."""
    n, k = diffs.shape
    if n < 2 or k < 2:
        raise ValueError(f"need at least 2 windows of at least 2 predictions, got {n} of {k}")
    diffs = diffs.astype(np.float64)
    sums, squares = diffs.sum(1), (diffs**2).sum(1)
    deff = float(_deff(sums, squares, k))
    picks = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    rhos = (_deff(sums[picks], squares[picks], k) - 1) / (k - 1)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = (np.nanpercentile(rhos, [tail, 100 - tail]) if np.isfinite(rhos).any() else (math.nan, math.nan))
    return Clustering(windows=n, per_window=k, disagreement=float(np.mean(diffs != 0)),
                      difference=100 * float(diffs.mean()), deff=deff, rho=(deff - 1) / (k - 1),
                      rho_low=float(low), rho_high=float(high),
                      se=100 * float(np.std(sums / k, ddof=1)) / math.sqrt(n))


class _Budget:
    """A clock for `ablate.trial.loop.train` that stops once `samples` are trained, as a trial's training for
    accuracy does (its evaluation comes at `train_samples`; the windows and profiling after it are not trained
    for accuracy). It times nothing."""

    profiling = False

    def __init__(self, samples: int) -> None:
        self.left = samples

    def batches(self, loader: Iterable[Any]) -> Iterator[Any]:
        while self.left > 0:
            for batch in loader:
                yield batch
                if self.left <= 0:
                    return

    def count(self, n: int, loss: Any = None) -> None:
        self.left -= n

    def mark(self, phase: int) -> None:
        pass


def variants(study: Study, pairs: Sequence[str]) -> dict[str, tuple[Study, tuple[Option, ...]]]:
    """The baseline and each pair's variant: the study to train (seed and learning rate) and the options."""
    base = tuple(options[0] for _, options in study.space)
    found = {"base": (study, base)}
    for pair in pairs:
        if pair == "lr":
            found[pair] = (replace(study, baseline=replace(study.baseline, lr=study.baseline.lr * LR_FACTOR)), base)
        elif pair == "seed":
            found[pair] = (replace(study, budget=replace(study.budget, seed=study.budget.seed + 1)), base)
        elif pair == "amp":
            amp = [(i, o) for i, (_, options) in enumerate(study.space) for o in options
                   if o.name == "amp" and dict(o.kwargs).get("dtype") == "bf16"]
            if not amp:
                print(f"  amp: {study.name} has no bf16 autocast choice; pair skipped", file=sys.stderr)
                continue
            i, option = amp[0]
            found[pair] = (study, base[:i] + (option,) + base[i + 1:])
        else:
            raise ValueError(f"unknown pair {pair!r}; the pairs are {', '.join(PAIRS)}")
    return found


def trained(study: Study, options: tuple[Option, ...], device: str) -> Any:
    """The study's set-up (`set_up`, seeded by its budget) trained for `train_samples`; the unwrapped model and
    what scoring needs from the set-up."""
    from ablate.trial.loop import train
    from ablate.trial.process import TrialSpec, set_up

    built = set_up(TrialSpec(study, options, device, train_for_accuracy=True))
    prepared = built.stack.prepare_model(built.model)
    optimizer = built.stack.prepare_optimizer(built.optimizer)
    train(built.stack, built.task, prepared, optimizer, built.loader, built.device,
          _Budget(study.budget.train_samples), study.baseline.max_grad_norm)
    return built


def scored(task: Any, model: Any, windows: Any, device: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each prediction of each window, shape (windows, k): whether it is right, and the class predicted. The
    positions and the argmax are those the task's accuracy counts (its `_logits_and_targets`, in fp32 without
    autocast as `ablate.trial.loop.evaluate`), each forward's logits within the device's budget (`eval_budget`)."""
    import torch
    from torch.utils.data import DataLoader

    from ablate.workload.tasks import eval_budget, eval_rows

    inputs, targets = next(iter(DataLoader(windows, batch_size=len(windows))))
    rows, start, right, predicted = 1, 0, [], []
    budget = eval_budget(torch.device(device))
    model.eval()
    with torch.inference_mode():
        while start < len(inputs):
            part = (inputs[start:start + rows].to(device), targets[start:start + rows].to(device))
            logits, wanted = task._logits_and_targets(model, part)
            taken, best = len(part[0]), logits.argmax(-1)
            right.append((best == wanted).view(taken, -1).cpu().numpy())
            predicted.append(best.view(taken, -1).cpu().numpy())
            start += taken
            rows = eval_rows(logits.numel() * max(logits.element_size(), 4) // taken, budget)
    model.train()
    return np.concatenate(right), np.concatenate(predicted)


def measure(study: Study, pairs: Sequence[str], windows: int, device: str,
            say: Any = lambda text: None) -> dict[str, Any]:
    """Train the baseline and each pair's variant, score them on the same windows, and compare each pair."""
    from torch.utils.data import Subset

    right: dict[str, np.ndarray] = {}
    guesses: dict[str, np.ndarray] = {}  # the class each model predicts at each position
    for name, (variant, options) in variants(study, pairs).items():
        say(f"  training {name}")
        built = trained(variant, options, device)
        test = built.splits.test
        picked = evaluation.indices(len(test), windows, study.budget.seed)
        say(f"  scoring {name} on {len(picked):,} of {len(test):,} windows")
        right[name], guesses[name] = scored(built.task, built.model, Subset(test, list(picked)), built.device)
    base = right.pop("base").astype(np.int8)
    return {"accuracy": {"base": 100 * float(base.mean()), **{n: 100 * float(r.mean()) for n, r in right.items()}},
            # classes a model predicts at all (1: it always guesses a space), and where a pair's guesses differ,
            # right or wrong: two near-unigram models can differ there and still never disagree on correctness
            "distinct": {n: len(np.unique(g)) for n, g in guesses.items()},
            "guesses_differ": {n: float(np.mean(g != guesses["base"])) for n, g in guesses.items() if n != "base"},
            "pairs": {n: clustering(base - r.astype(np.int8)) for n, r in right.items()}}


def table(found: dict[str, Any]) -> str:
    """The pairs as one plain table."""
    head = (f"{'pair':<6} {'acc A':>6} {'acc B':>6} {'d':>6} {'deff':>6} {'rho':>8} {'95% interval':>19} "
            f"{'SE':>5} {'bound':>5} {'at d':>5}  windows x k  classes A/B  argmax differs")
    lines = [head]
    for name, c in found["pairs"].items():
        lines.append(f"{name:<6} {found['accuracy']['base']:6.2f} {found['accuracy'][name]:6.2f} "
                     f"{c.disagreement:6.3f} {c.deff:6.3f} {c.rho:8.5f} [{c.rho_low:8.5f}, {c.rho_high:8.5f}] "
                     f"{c.se:5.2f} {c.bound:5.2f} {c.bound_at_d:5.2f}  {c.windows:,} x {c.per_window}  "
                     f"{found['distinct']['base']}/{found['distinct'][name]}  "
                     f"{found['guesses_differ'][name]:.3f}")
    return "\n".join(lines)


def _plain(figures: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: an undefined figure (two models that never disagree have no rho) is null."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in figures.items()}


def main(argv: list[str] | None = None) -> int:
    from ablate.trial.machine import describe

    parser = argparse.ArgumentParser(prog="python -m benchmarks.within_window", description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True, help="a study file or name")
    parser.add_argument("--pairs", nargs="+", choices=PAIRS, default=list(PAIRS))
    parser.add_argument("--windows", type=int, default=WINDOWS, help="held-out windows (default: %(default)s)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    study = studies.load(args.study, args.device.split(":")[0])
    machine = describe(args.device)
    print(f"{study.name}: {study.model}, {study.task_name}, {study.budget.train_samples:,} samples of batch "
          f"{study.baseline.batch_size}; {machine.device_name}, torch {machine.torch}, commit {machine.commit}")
    found = measure(study, args.pairs, args.windows, args.device, say=lambda text: print(text, file=sys.stderr))
    print(table(found))
    print(f"SE: the paired difference's standard error measured, points; bound: evaluation.sampling_error (d = "
          f"{evaluation.DISAGREEMENT}, rho = {evaluation.WITHIN_WINDOW}); at d: that bound at the measured d; "
          "classes: how many classes each model predicts at all; argmax differs: the share of positions "
          "where the two predict different classes")
    if args.json:
        args.json.write_text(json.dumps({
            "study": str(study.path), "machine": asdict(machine), "within_window_rule": evaluation.WITHIN_WINDOW,
            "accuracy": found["accuracy"], "distinct_predictions": found["distinct"],
            "guesses_differ": found["guesses_differ"],
            "pairs": {n: _plain({**asdict(c), "bound": c.bound, "bound_at_d": c.bound_at_d})
                      for n, c in found["pairs"].items()},
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""benchmarks/within_window.py: its statistic recovers a known within-window correlation, and it scores the
positions the task's accuracy counts. No training."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from ablate.trial.loop import evaluate
from ablate.workload import evaluation, tasks
from ablate.workload.models import ByteGPT
from benchmarks.within_window import clustering, scored, table

WINDOWS, K = 1_000, 63  # gpt2_item8's shape: 63 predictions a window


def _cluster_sample(rho: float, seed: int) -> np.ndarray:
    """A window effect of variance rho plus noise of variance 1 - rho: the correlation within a window is rho."""
    rng = np.random.default_rng(seed)
    return (rng.normal(0, math.sqrt(rho), (WINDOWS, 1)) + rng.normal(0, math.sqrt(1 - rho), (WINDOWS, K)))


@pytest.mark.parametrize("rho", [0.0, 0.05])
def test_a_known_correlation_lies_in_its_bootstrap_interval(rho):
    found = clustering(_cluster_sample(rho, seed=7))
    assert found.rho_low <= rho <= found.rho_high
    assert found.rho_low < found.rho < found.rho_high
    assert found.deff == pytest.approx(1 + (K - 1) * found.rho)


def test_the_interval_tells_a_correlated_sample_from_an_independent_one():
    assert clustering(_cluster_sample(0.05, seed=1)).rho_low > clustering(_cluster_sample(0.0, seed=1)).rho_high


def test_independent_disagreements_have_mcnemars_standard_error():
    # D is +1 or -1 on a share d of the predictions, independently: deff near 1, SE near sqrt(d / n) (points).
    rng = np.random.default_rng(3)
    d = 0.2
    diffs = rng.choice([-1, 0, 1], p=[d / 2, 1 - d, d / 2], size=(WINDOWS, K))
    found = clustering(diffs)
    assert found.disagreement == pytest.approx(d, abs=0.01)
    assert found.rho_low <= 0 <= found.rho_high
    assert found.se == pytest.approx(100 * math.sqrt(d / (WINDOWS * K)), rel=0.1)
    assert found.bound == evaluation.sampling_error(WINDOWS, K)
    assert found.bound_at_d == pytest.approx(found.bound * math.sqrt(found.disagreement / evaluation.DISAGREEMENT))


def test_two_models_that_never_disagree_have_no_correlation_to_measure():
    found = clustering(np.zeros((WINDOWS, K)))
    assert found.disagreement == 0 and found.se == 0 and found.difference == 0
    assert math.isnan(found.rho) and math.isnan(found.rho_low)


class _TinyCausalLM(torch.nn.Module):
    """A Hugging Face-shaped causal LM: `model(input_ids=...)` returns an object with `.logits`."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = ByteGPT(seq_len=16, n_layer=1, n_head=1, d_model=16)

    def forward(self, input_ids: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.inner(input_ids))


@pytest.mark.parametrize("task, model", [(tasks.NextToken(seq_len=16), ByteGPT(seq_len=16, n_layer=1, n_head=1,
                                                                                 d_model=16)),
                                         (tasks.CausalLM(seq_len=16), _TinyCausalLM())])
def test_it_scores_the_predictions_the_tasks_accuracy_counts(task, model):
    torch.manual_seed(0)
    text = torch.randint(0, 4, (40, 17))  # four symbols: an untrained model is right often enough to count
    windows = TensorDataset(text[:, :-1], text[:, 1:])
    right, predicted = scored(task, model, windows, torch.device("cpu"))
    assert right.shape == predicted.shape == (40, task.predictions_per_sample)
    quality = evaluate(task, model, DataLoader(windows, batch_size=7), torch.device("cpu"))
    assert 100 * right.mean() == pytest.approx(quality.accuracy)


def test_the_table_has_a_row_per_pair_and_says_where_rho_is_undefined():
    found = {"accuracy": {"base": 17.7, "lr": 17.7, "seed": 18.0}, "distinct": {"base": 1, "lr": 1, "seed": 3},
             "guesses_differ": {"lr": 0.0, "seed": 0.02},
             "pairs": {"lr": clustering(np.zeros((WINDOWS, K))), "seed": clustering(_cluster_sample(0.0, seed=2))}}
    rows = table(found).splitlines()
    assert [r.split()[0] for r in rows] == ["pair", "lr", "seed"]
    assert "nan" in rows[1] and "nan" not in rows[2] and rows[2].endswith("1/3  0.020")

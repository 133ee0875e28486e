"""benchmarks/holdout.py: the split, the coverage arithmetic and the rank agreement, on a synthetic additive grid
measured as a single pass (one block, one baseline, every cell once). No storage, no training."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ablate.config.choices import BASELINE, Levels, Option, baseline_levels, grid
from ablate.stats.protocol import SCREEN, Measurement
from ablate.stats.screening.fraction import screening_fraction
from benchmarks.holdout import Row, clopper_pearson, halves, hold_out

OPTIONS = {**{f"f{i}": {"off": Option(None), f"s{i}": Option(f"s{i}")} for i in range(4)},
           "graph": {"off": Option(None), "torchscript": Option("torchscript"), "compile": Option("compile")}}
EFFECT = {"s0": -0.10, "s1": 0.30, "s2": 0.02, "s3": 0.45, "torchscript": 0.05, "compile": 0.20}  # log speed-ups


def _label(levels: Levels) -> str:
    on = [label for _, label in levels if label != "off"]
    return " + ".join(on) if on else BASELINE


CELLS = {_label(levels): levels for levels in grid(OPTIONS)}
FRACTION = screening_fraction(OPTIONS, list(CELLS.values()), baseline_levels(OPTIONS))


def _truth(cell: str) -> float:
    return 0.0 if cell == BASELINE else sum(EFFECT[t] for t in cell.split(" + "))


def _single_pass(sigma: float, seed: int) -> list[Measurement[str]]:
    rng = np.random.default_rng(seed)
    return [Measurement(c, 0, SCREEN, 5.0 + _truth(c) + rng.normal(0, sigma)) for c in CELLS]


def test_the_two_splits_are_the_fraction_and_its_complement_the_baseline_fitted_in_both():
    assert FRACTION is not None and len(CELLS) == 48
    split = halves(CELLS, FRACTION)
    for fitted, held in split.values():
        assert BASELINE in fitted and BASELINE not in held
        assert not fitted & held and fitted | held == set(CELLS)
    assert len(split["fraction"][0]) == 24 and len(split["fraction"][1]) == 24
    assert split["complement"][1] == split["fraction"][0] - {BASELINE}


@pytest.mark.parametrize("split", ["fraction", "complement"])
def test_an_additive_grid_is_predicted_and_its_best_held_out_cell_is_in_the_field(split):
    assert FRACTION is not None
    fitted, held = halves(CELLS, FRACTION)[split]
    found = hold_out(split, _single_pass(0.01, seed=3), CELLS, FRACTION, fitted, held, contenders=6)
    assert found is not None and {r.cell for r in found.rows} == held
    for r in found.rows:
        assert r.predicted == pytest.approx(_truth(r.cell), abs=0.05)
        assert r.noise == "residual"  # one block, one baseline: no process variance was measured
        assert r.printed[0] <= r.predicted <= r.printed[1]
        # the interval for a measurement is wider than the one for the cell's true speed-up
        assert r.predictive[1] - r.predictive[0] > r.printed[1] - r.printed[0]
    assert found.spearman is not None and found.spearman > 0.95
    assert found.best == max(held, key=_truth) and found.best_in_field


def test_predictive_coverage_is_near_its_level_when_the_model_is_true():
    assert FRACTION is not None
    inside = total = 0
    for seed in range(10):
        for split, (fitted, held) in halves(CELLS, FRACTION).items():
            found = hold_out(split, _single_pass(0.05, seed), CELLS, FRACTION, fitted, held, contenders=6)
            assert found is not None
            x, n, low, high = found.coverage("predictive")
            assert low <= x / n <= high
            inside, total = inside + x, total + n
    assert 0.85 <= inside / total <= 1.0  # 470 cells, not independent (each pass shares its baseline)


def test_a_row_counts_its_measurement_against_both_intervals():
    row = Row("a", predicted=0.10, se=0.03, df=10, printed=(0.03, 0.17), observed=0.20, observed_se=0.04,
              noise="residual", predictive=(0.0, 0.21))
    assert row.z == pytest.approx(0.10 / 0.05)
    assert not row.in_printed and row.in_predictive


def test_clopper_pearson_matches_the_exact_binomial_limits():
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** 0.1))  # (1 - p)^10 = 0.025
    assert clopper_pearson(10, 10) == (pytest.approx(0.025 ** 0.1), 1.0)
    low, high = clopper_pearson(5, 10)
    assert low == pytest.approx(1 - high) and low == pytest.approx(0.1871, abs=1e-4)
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    assert not math.isnan(clopper_pearson(23, 24)[0])


def test_a_folder_without_a_stored_study_is_refused_in_one_line(tmp_path, capsys):
    from benchmarks.holdout import main

    with pytest.raises(SystemExit) as stopped:
        main(["--from", str(tmp_path), "--study", "mnist_cnn"])
    assert stopped.value.code == 2
    assert "no stored study of mnist_cnn" in capsys.readouterr().err

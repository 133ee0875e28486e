"""The screening model (`ablate.stats.screening.factorial`): the grid ranked from its fraction, proven by simulation.

Simulated on mnist_cnn's CPU grid (tests/stats/factorial_sim.py: 48 cells, the 24 of the resolution IV half
fraction screened in 3 blocks of 8 + 2 baselines with drift; bf16 processes at two levels 40% apart, the others
N(0, sigma); a 10% three-factor interaction batch x bf16 x compile the model has no term for; two small pairs
aliased in chains; the best cell unscreened, its runner-up 6% behind and screened). 1000 studies at each noise
(seeds 0-999; 100000-; 200000-), Clopper-Pearson 95% bounds:

- the true best in the opening field of 6 (k = 4): noise 0.08, 976 (918), lower bound 0.966 (0.902); noise
  0.15, 922 (834), lower bound 0.907 (0.813): short of 95% (xfail below); no model tried reached it there
  (main effects alone: 94% of 200). Screening every cell once (59 measurements) opened with it in 532 and 550.
- unscreened cells' 95% intervals held the truth in 23003 and 23112 of 24000 (95.8%, 96.3%).
- the fold-over, where the model is right (main effects and the pairs the fraction keeps apart): 36 and 25
  (upper bounds 0.047, 0.035); with a 49% pair batch x bf16 aliased with workers x set_to_none: 672 and 489
  (lower bounds 0.647, 0.463: at 0.15 not "usually", xfail below). On the grid above: 44 and 24 fold-overs,
  30.3 and 29.7 screening measurements a study (every cell once: 59); with the big pair, 49.2 and 43.7.

- `--single-pass` (every cell once, one block, one baseline: `single_pass`): its pick is the truly best cell in
  680 and 603 of 1000 studies from the model fitted to all 48 (Clopper-Pearson 0.655-0.704, 0.577-0.629), 468 and
  463 from the largest single estimate (0.442-0.494, 0.437-0.489). Where the truth is the model's (no
  three-factor term): 561 and 500 against 422 and 392. So the single pass recommends the model's best
  (`racing._unraced`); it is still wrong in a third of studies or more, which its "no interval" says.

The smoke tests run SMOKE studies; ABLATE_FULL_SIMULATIONS=1 runs the full replicates (about 6 minutes).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np
import pytest
from factorial_sim import (
    BASELINE,
    CELLS,
    COMPILE,
    FRACTION,
    MODEL,
    TRUTH,
    A,
    B,
    S,
    best,
    covered,
    every_cell_once,
    field,
    screen,
    single_pass,
    value,
)
from test_headline import cp_lower, cp_upper

from ablate.stats.protocol import RACE, SCREEN, Measurement
from ablate.stats.screening import factorial
from ablate.stats.screening.factorial import ALIAS_ALPHA

STUDIES = 1000
SMOKE = 30
SINGLE_PASS_SMOKE = 60  # about 2 s
NOISES = (0.08, 0.15)
BIG = {(B, A): 0.4}  # an aliased pair (with num_workers x set_to_none) the model carries as one chain
RIGHT = {k: v for k, v in MODEL.items() if len(k) == 1 or COMPILE in k}  # the pairs the fraction keeps apart
SCENARIOS = {"truth": (TRUTH, 0), "right": (RIGHT, 10**5), "big": ({**TRUTH, **BIG}, 2 * 10**5)}  # truth, first seed
FULL = pytest.mark.skipif(not os.environ.get("ABLATE_FULL_SIMULATIONS"),
                          reason="1000 simulated screenings per noise level and scenario, about 5 minutes on 2 "
                                 "cores: ABLATE_FULL_SIMULATIONS=1 runs them (the smoke tests run always)")
CELL_MAP = {c: c for c in CELLS}


def _exact(truth, cells=FRACTION.cells, blocks=3) -> list[Measurement]:
    """Noise-free screening of `cells` (each once, in `blocks` blocks with two baselines each) with block drift:
    the model must recover the truth exactly where it has the terms."""
    others = [c for c in cells if c != BASELINE]
    out = []
    for b in range(blocks):
        drift = 0.1 * b
        out += [Measurement(BASELINE, b, SCREEN, drift + d) for d in (-0.001, 0.001)]
        out += [Measurement(c, b, SCREEN, drift + value(truth, c)) for c in others[b::blocks]]
    return out


def test_a_model_with_the_terms_predicts_every_unscreened_cell():
    """Main effects and pairs the fraction keeps apart (bf16 x compile, workers x compile): exact predictions
    of all 48 from 24, block drift cancelled, no chain active, no fold-over."""
    found = factorial.fit(_exact(RIGHT), BASELINE, CELL_MAP, FRACTION)
    assert found is not None and set(found.predictions) == set(CELLS)
    for c in CELLS:
        assert found.predictions[c].log == pytest.approx(value(RIGHT, c), abs=1e-6)
        assert found.predictions[c].measured == (c in FRACTION.cells)
    assert found.active_aliases == () and not found.fold_over and found.unscreened


def test_an_aliased_pair_is_named_as_its_chain_and_calls_for_the_fold_over():
    found = factorial.fit(_exact({**MODEL, **BIG}), BASELINE, CELL_MAP, FRACTION)
    assert found is not None and found.fold_over
    assert "batch_size x amp" in " ".join(found.active_aliases)
    assert any("num_workers x set_to_none" in a and "batch_size x amp" in a for a in found.active_aliases)


def test_an_unscreened_cell_takes_an_equal_share_of_its_chain_and_its_spread():
    """stn x bf16 (0.06) shares a chain with workers x batch: where they part (unscreened cells), the prediction is
    off by a quarter of it at most, and its standard error holds that (noise-free: the spread alone)."""
    truth = {(S, A): 0.06}
    found = factorial.fit(_exact(truth), BASELINE, CELL_MAP, FRACTION)
    assert found is not None
    for c in FRACTION.rest:
        p = found.predictions[c]
        assert abs(p.log - value(truth, c)) <= 0.06 / 2 + 1e-9
        assert p.se >= abs(p.log - value(truth, c)) - 1e-9
    assert all(found.predictions[c].se < 0.01 for c in FRACTION.cells)  # the baselines' +-0.001 only


def test_a_full_grid_has_no_chains_and_nothing_to_fold_over():
    found = factorial.fit(_exact(TRUTH, CELLS, 6), BASELINE, CELL_MAP, None)
    assert found is not None and not found.unscreened and not found.fold_over and found.active_aliases == ()
    # the three-factor interaction has no term: the residual shows it, against the baselines' pure error
    assert found.lack_of_fit_p is not None and found.lack_of_fit_p < 0.01


def test_too_few_cells_or_no_baseline_give_no_fit():
    few = [m for m in _exact(MODEL) if m.combination == BASELINE or dict(m.combination)["graph"] == "off"][:6]
    assert factorial.fit(few, BASELINE, CELL_MAP, FRACTION) is None
    assert factorial.fit([m for m in _exact(MODEL) if m.combination != BASELINE], BASELINE, CELL_MAP,
                         FRACTION) is None


def test_a_technique_the_variance_model_finds_noisier_weighs_less():
    """Cells measured again (race blocks) give the variance model a bf16 term: the screening fit then weighs bf16
    processes less, which moves its estimates (and not when the repeats show no difference)."""
    rng = np.random.default_rng(3)
    screening = [Measurement(m.combination, m.block, SCREEN, m.log_throughput + rng.normal(0, 0.05))
                 for m in _exact(MODEL)]
    race = []
    for b in range(10, 14):
        race += [Measurement(BASELINE, b, RACE, rng.normal(0, 0.02))]
        race += [Measurement(c, b, RACE, value(MODEL, c) + rng.normal(0, 0.3 if dict(c)["amp"] == A else 0.02))
                 for c in FRACTION.cells if c != BASELINE]
    plain = factorial.fit(screening, BASELINE, CELL_MAP, FRACTION)
    weighed = factorial.fit(screening + race, BASELINE, CELL_MAP, FRACTION)
    assert plain is not None and weighed is not None
    top = max(CELLS, key=lambda c: value(MODEL, c))
    assert weighed.predictions[top].log != pytest.approx(plain.predictions[top].log, abs=1e-6)


def test_the_race_field_is_the_predicted_best_first_without_the_baseline():
    found = factorial.fit(_exact(TRUTH), BASELINE, CELL_MAP, FRACTION)
    assert found is not None
    opening = field(found, 6)
    assert 1 <= len(opening) <= 6 and BASELINE not in opening
    logs = [found.predictions[c].log for c in opening]
    assert logs == sorted(logs, reverse=True) and logs[0] == max(p.log for c, p in found.predictions.items()
                                                                  if c != BASELINE)
    assert factorial.race_field(found, 4, 0.005) == opening[:4] or len(factorial.race_field(found, 4, 0.005)) <= 4


@dataclass(frozen=True)
class Rates:
    studies: int
    in6: int  # studies whose opening field of 6 (after the fold-over where it fired) held the true best cell
    in4: int
    covered: int  # unscreened cells' 95% prediction intervals (the fraction's fit) that held their truth
    intervals: int
    folded: int  # studies whose fit on the fraction called for the fold-over
    measurements: float  # screening measurements a study, the fold-over's included


@functools.lru_cache(maxsize=None)
def _rates(scenario: str, sigma: float, n: int) -> Rates:
    """`n` studies of a scenario (its own seeds) at process noise `sigma`."""
    truth, start = SCENARIOS[scenario]
    out = screen(truth, sigma, range(start, start + n))
    top = best(truth)
    return Rates(n, sum(top in field(o.last, 6) for o in out), sum(top in field(o.last, 4) for o in out),
                 sum(covered(o.first, truth, FRACTION.rest) for o in out), n * len(FRACTION.rest),
                 sum(o.first.fold_over for o in out), float(np.mean([o.measurements for o in out])))


def test_the_true_best_opens_the_race_and_predictions_cover_smoke():
    """SMOKE studies of the full run below at the quieter noise."""
    found = _rates("truth", NOISES[0], SMOKE)
    assert found.in6 >= SMOKE - 1, found
    assert found.covered / found.intervals >= 0.93, found


def test_the_fold_over_fires_for_a_big_alias_and_not_for_a_right_model_smoke():
    assert _rates("right", NOISES[0], SMOKE).folded <= 2
    assert _rates("big", NOISES[0], SMOKE).folded >= SMOKE // 2


@FULL
@pytest.mark.slow
@pytest.mark.parametrize("sigma", [NOISES[0], pytest.param(NOISES[1], marks=pytest.mark.xfail(
    strict=True, reason="at process noise 0.15 the true best opened the race in 922 of 1000 studies (CP lower "
                        "bound 0.907): no model tried reached 95% (the module's figures)"))])
def test_the_true_best_opens_the_race(sigma):
    """The true best cell (unscreened) is in the opening field of 6 in at least 95% of studies (Clopper-Pearson
    lower bound), and the model beats screening every cell once (the power beside it)."""
    found = _rates("truth", sigma, STUDIES)
    before = every_cell_once(TRUTH, sigma, range(STUDIES), 6)
    once = sum(best(TRUTH) in f for f in before)
    print(f"\nsigma {sigma}: {found}; in 6: CP lower {cp_lower(found.in6, STUDIES):.3f}, in 4: "
          f"{cp_lower(found.in4, STUDIES):.3f}; every cell once: {once} ({cp_upper(once, STUDIES):.3f} upper)")
    assert cp_upper(once, STUDIES) < cp_lower(found.in6, STUDIES)
    assert cp_lower(found.in6, STUDIES) >= 0.95, found


@FULL
@pytest.mark.slow
@pytest.mark.parametrize("sigma", NOISES)
def test_unscreened_cells_prediction_intervals_cover(sigma):
    """Each unscreened cell's 95% interval holds its true log speed-up in at least 93% of cells x studies (the
    bound over the intervals: those of one study are not independent, so it is looser than it reads)."""
    found = _rates("truth", sigma, STUDIES)
    print(f"\nsigma {sigma}: {found.covered} of {found.intervals} "
          f"(CP lower {cp_lower(found.covered, found.intervals):.4f})")
    assert cp_lower(found.covered, found.intervals) >= 0.93, found


@FULL
@pytest.mark.slow
@pytest.mark.parametrize("sigma", NOISES)
def test_the_fold_over_fires_rarely_when_the_model_is_right(sigma):
    right = _rates("right", sigma, STUDIES)
    print(f"\nsigma {sigma}: {right.folded} of {STUDIES} (CP upper {cp_upper(right.folded, STUDIES):.3f})")
    assert cp_upper(right.folded, STUDIES) <= ALIAS_ALPHA


@FULL
@pytest.mark.slow
@pytest.mark.parametrize("sigma", [NOISES[0], pytest.param(NOISES[1], marks=pytest.mark.xfail(
    strict=True, reason="at process noise 0.15 a 49% aliased pair called the fold-over in 489 of 1000 studies"))])
def test_the_fold_over_fires_usually_for_a_big_aliased_pair(sigma):
    big = _rates("big", sigma, STUDIES)
    print(f"\nsigma {sigma}: {big.folded} of {STUDIES} (CP lower {cp_lower(big.folded, STUDIES):.3f}), "
          f"{big.measurements:.1f} measurements a study")
    assert cp_lower(big.folded, STUDIES) >= 0.5


def test_the_single_pass_picks_the_true_best_more_often_from_the_model_smoke():
    """SINGLE_PASS_SMOKE studies of the run below at the quieter noise: the model's pick is the true best more often."""
    raw, model = single_pass(TRUTH, NOISES[0], range(SINGLE_PASS_SMOKE))
    top = best(TRUTH)
    assert sum(c == top for c in model) > sum(c == top for c in raw)


@FULL
@pytest.mark.slow
@pytest.mark.parametrize("sigma", NOISES)
def test_the_single_pass_picks_the_true_best_more_often_from_the_model(sigma):
    """The power check for the single pass's decision: its pick from the screening model is the truly best cell more
    often than the largest single estimate is, the Clopper-Pearson intervals apart (module docstring's figures)."""
    raw, model = single_pass(TRUTH, sigma, range(STUDIES))
    top = best(TRUTH)
    r, m = sum(c == top for c in raw), sum(c == top for c in model)
    print(f"\nsigma {sigma}: model {m} [{cp_lower(m, STUDIES):.3f}, {cp_upper(m, STUDIES):.3f}], largest single "
          f"estimate {r} [{cp_lower(r, STUDIES):.3f}, {cp_upper(r, STUDIES):.3f}] of {STUDIES}")
    assert cp_upper(r, STUDIES) < cp_lower(m, STUDIES)

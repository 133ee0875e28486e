"""Two studies compared row by row (`ablate.stats.changes`): the verdicts' rules, and their error rates simulated.

Each simulated study is repro16's grid (`REPRO16` of test_race_first.py: 15 combinations beside the baseline) on a
host whose log throughput is the combination's truth + its block's drift (N(0, `DRIFT`): it cancels in a speed-up,
not in the baseline's level) + process noise N(0, sigma), in one of two designs, numpy throughout:
- `full`: every combination once in each of `BLOCKS` blocks with the baseline; a speed-up is the mean over blocks
  of (combination - its block's baseline), its standard error from their spread (df: blocks - 1);
- `typical`: repro16 as the default protocol measures it, simplified: screening in two blocks (8 and 7
  combinations, two baselines each), the six fastest on screening raced in six blocks of their own (a baseline
  each; estimates from race blocks only), the fastest of those confirmed in three more; one pooled process variance
  from the baselines' pairs within screening blocks and the raced combinations' paired differences (32 df).
The baseline's level: the mean over its blocks of their baselines, its standard error across blocks.

Pairs of independent studies are compared as `ablate compare` compares them. Rates are one-sided 95%
Clopper-Pearson bounds, as in test_decisions.py. The suite runs `PAIRS` pairs per case, checking the machinery and
the rules' direction; ABLATE_FULL_SIMULATIONS=1 runs 4,000 and asserts the figures in docs/evidence.md,
"Evidence: comparing two studies".
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from test_decisions import BASE
from test_headline import cp_lower, cp_upper
from test_race_first import REPRO16

from ablate.stats import changes
from ablate.stats.changes import BASELINE_ABSOLUTE, MOVED, NOT_SHOWN, ONLY_A, ONLY_B, PREDICTED, SAME, Side

FULL = bool(os.environ.get("ABLATE_FULL_SIMULATIONS"))
PAIRS = 4000 if FULL else 400
NAMES = [c for c in REPRO16.truth if c != BASE]
TRUTH = np.array([REPRO16.truth[c] for c in NAMES])
DRIFT = 0.05  # between blocks, log scale
BLOCKS = 12
MOVING = "set_to_none + amp"  # the row a power case moves
SLOWER = math.log(1 / 1.15)  # 15% slower


def _studies(sides: tuple[np.ndarray, ...], df: float, level: tuple[np.ndarray, np.ndarray, float]
             ) -> list[dict[str, Side]]:
    (log, se), (lv, lse, ldf) = sides, level
    return [{BASELINE_ABSOLUTE: Side(float(lv[i]), float(lse[i]), ldf),
             **{c: Side(float(log[i, j]), float(se[i, j]), df) for j, c in enumerate(NAMES)}}
            for i in range(len(log))]


def full(noise: float, n: int, rng: np.random.Generator, shift: np.ndarray | float = 0.0, level: float = 0.0,
         blocks: int = BLOCKS) -> list[dict[str, Side]]:
    """`n` studies of the full design; `shift`: added to the true speed-ups, `level`: to every log throughput."""
    drift = rng.normal(0.0, DRIFT, (n, blocks, 1))
    base = level + drift[..., 0] + rng.normal(0.0, noise, (n, blocks))
    d = TRUTH + shift + level + drift + rng.normal(0.0, noise, (n, blocks, len(NAMES))) - base[..., None]
    root = math.sqrt(blocks)
    return _studies((d.mean(1), d.std(1, ddof=1) / root), blocks - 1,
                    (base.mean(1), base.std(1, ddof=1) / root, blocks - 1))


def typical(noise: float, n: int, rng: np.random.Generator, shift: np.ndarray | float = 0.0,
            level: float = 0.0) -> list[dict[str, Side]]:
    """`n` studies of the typical design (the module docstring)."""
    k, rows = len(NAMES), np.arange(n)[:, None]
    truth = np.broadcast_to(TRUTH + shift, (n, k))
    of = np.arange(k) // 8  # each combination's screening block
    drift = rng.normal(0.0, DRIFT, (n, 11))  # 2 screening, 6 race, 3 confirmation blocks
    pairs = level + drift[:, :2, None] + rng.normal(0.0, noise, (n, 2, 2))  # two baselines a screening block
    log = truth + level + drift[:, of] + rng.normal(0.0, noise, (n, k)) - pairs.mean(2)[:, of]
    raced = np.argsort(-log, axis=1)[:, :6]
    race_base = level + drift[:, 2:8] + rng.normal(0.0, noise, (n, 6))
    d = (truth[rows, raced][..., None] + level + drift[:, None, 2:8] + rng.normal(0.0, noise, (n, 6, 6))
         - race_base[:, None, :])
    log[rows, raced] = d.mean(2)
    leader = raced[np.arange(n), d.mean(2).argmax(1)]
    confirm_base = level + drift[:, 8:] + rng.normal(0.0, noise, (n, 3))
    log[np.arange(n), leader] = (truth[np.arange(n), leader] + rng.normal(0.0, noise, (n, 3)).mean(1)
                                 + (level + drift[:, 8:] - confirm_base).mean(1))
    # var(d) across race blocks is 2 sigma^2 (one baseline a block); pooled with the screening pairs' 2 df
    var = (pairs.var(2, ddof=1).sum(1) + 5 * (d.var(2, ddof=1) / 2).sum(1)) / 32
    blocks = np.full((n, k), 1.0 / 1.5)  # a screened one: its block's two baselines, var sigma^2 (1 + 1/2)
    blocks[rows, raced], blocks[np.arange(n), leader] = 3.0, 1.5  # raced: 6 blocks / 2, confirmed: 3 / 2
    se = np.sqrt(var[:, None] / blocks)
    means = np.concatenate([pairs.mean(2), race_base, confirm_base], axis=1)
    return _studies((log, se), 32, (means.mean(1), means.std(1, ddof=1) / math.sqrt(11), 10))


def verdicts(design, noise: float, seed: int, **b_change) -> list[list[changes.Change]]:
    """`PAIRS` pairs of studies of `design` at `noise`, B with `b_change` (`shift`, `level`) and A without."""
    rng = np.random.default_rng(seed)
    a, b = design(noise, PAIRS, rng), design(noise, PAIRS, rng, **b_change)
    return [changes.change(x, y) for x, y in zip(a, b)]


def moved(found: list[list[changes.Change]], rows: set[str] | None = None) -> np.ndarray:
    """How many rows (of `rows`; all without) each pair called moved."""
    return np.array([sum(c.verdict == MOVED and (rows is None or c.row in rows) for c in pair) for pair in found])


# ---- the rules, on rows built by hand ----

def test_rows_keep_a_s_order_then_b_s_and_only_one_side_is_said():
    a = {"x": Side(0.1, 0.02, 10), "y": Side(0.2, 0.02, 10)}
    b = {"y": Side(0.2, 0.02, 10), "z": Side(0.3, 0.02, 10)}
    found = changes.change(a, b)
    assert [(c.row, c.verdict) for c in found] == [("x", ONLY_A), ("y", NOT_SHOWN), ("z", ONLY_B)]
    assert found[0].log is None and found[0].interval is None and found[2].a is None


def test_each_verdict_is_read_from_its_printed_interval():
    """Moved: the interval excludes 1; same: it lies within the margin; else it holds 1 and reaches past the margin,
    and the bound is how far it reaches."""
    a = {c: Side(0.0, 0.01, 20) for c in "abc"}
    b = {"a": Side(0.30, 0.01, 20), "b": Side(0.002, 0.004, 20), "c": Side(0.01, 0.05, 20)}
    found = {c.row: c for c in changes.change(a, b, margin=0.05)}
    assert found["a"].verdict == MOVED and found["a"].low > 0
    assert found["b"].verdict == SAME and math.log(1 / 1.05) < found["b"].low < found["b"].high < math.log(1.05)
    c = found["c"]
    assert c.verdict == NOT_SHOWN and c.low < 0 < c.high and c.bound == pytest.approx(math.expm1(max(-c.low, c.high)))
    assert c.ratio == pytest.approx(math.exp(0.01)) and c.interval == pytest.approx((math.exp(c.low), math.exp(c.high)))


def test_holm_calls_more_moved_than_bonferroni_and_its_intervals_agree():
    """Three rows at p below 0.05/4, which Bonferroni calls too, and one at 0.02, which only Holm's last step (0.05/1)
    calls: its interval is that step's, excluding 1, where Bonferroni's would hold it."""
    a = {c: Side(0.0, 0.1, math.inf) for c in "abcd"}
    b = {c: Side(0.1 * z, 0.0, math.inf) for c, z in zip("abcd", (2.6, 2.7, 2.8, 2.33))}
    found = changes.change(a, b)
    assert [c.verdict for c in found] == [MOVED] * 4
    assert all(c.low > 0 for c in found) and found[3].p == pytest.approx(0.0198, abs=1e-3)
    assert found[3].low == pytest.approx(0.233 - 1.96 * 0.1, abs=1e-3)


def test_a_prediction_is_never_moved_nor_same_and_leaves_the_family():
    a = {"p": Side(0.0, 0.01, 10, predicted=True), "x": Side(0.0, 0.01, 10)}
    b = {"p": Side(0.5, 0.01, 10), "x": Side(0.5, 0.01, 10)}
    found = {c.row: c for c in changes.change(a, b)}
    assert found["p"].verdict == PREDICTED and found["p"].low is not None and found["p"].detectable is None
    assert found["x"].verdict == MOVED and found["x"].p is not None
    alone = changes.change({"x": a["x"]}, {"x": b["x"]})[0]  # the family is one row either way
    assert (alone.low, alone.high) == pytest.approx((found["x"].low, found["x"].high))


def test_a_row_without_a_spread_shows_no_interval_and_no_bound():
    a = {"x": Side(0.0, None, 0), "y": Side(0.0, 0.02, 0)}
    b = {"x": Side(0.9, 0.01, 10), "y": Side(0.9, 0.01, 10)}
    for c in changes.change(a, b):
        assert c.verdict == NOT_SHOWN and c.interval is None and c.bound is None and c.log == pytest.approx(0.9)


def test_welch_degrees_of_freedom_and_a_known_side():
    a, b = Side(0.0, 0.03, 4), Side(0.0, 0.04, 9)
    assert changes.welch_df(a, b) == pytest.approx((0.03**2 + 0.04**2) ** 2 / (0.03**4 / 4 + 0.04**4 / 9))
    assert changes.welch_df(a, Side(0.0, 0.0, 0)) == pytest.approx(4)
    assert changes.welch_df(Side(0.0, 0.1, math.inf), Side(0.0, 0.1, math.inf)) == math.inf


def test_the_smallest_detectable_change_and_the_design_margin():
    """One row on infinite df: detectable (z_{1-alpha/2} + z_{0.80}) se, showable z_{1-alpha/2} se; the design
    margin is the largest showable."""
    a = {"x": Side(0.0, 0.03, math.inf), "y": Side(0.0, 0.06, math.inf)}
    found = changes.change(a, a)
    x = found[0]
    assert x.detectable == pytest.approx(math.expm1((2.2414 + 0.8416) * 0.03 * math.sqrt(2)), rel=1e-3)
    assert x.showable == pytest.approx(math.expm1(2.2414 * 0.03 * math.sqrt(2)), rel=1e-3)
    assert changes.design_margin(found) == found[1].showable and changes.design_margin([]) is None


def test_moved_beyond_a_threshold_either_way():
    a = {c: Side(0.0, 0.01, 20) for c in "abc"}
    b = {"a": Side(math.log(1.2), 0.01, 20), "b": Side(math.log(1 / 1.2), 0.01, 20), "c": Side(0.05, 0.01, 20)}
    found = changes.change(a, b)
    assert [c.verdict for c in found] == [MOVED] * 3
    assert [c.row for c in changes.moved_beyond(found, 0.10)] == ["a", "b"]


def test_a_bad_margin_is_refused():
    with pytest.raises(ValueError):
        changes.change({}, {}, margin=0)


# ---- the rates, simulated ----

def _power(hits: int, at_least: float) -> None:
    """A power: its Clopper-Pearson lower bound at least `at_least` on the full run; on the cheap one, the data must
    not show it below (the upper bound)."""
    assert (cp_lower if FULL else cp_upper)(hits, PAIRS) >= at_least, hits


def _rate(hits: int, at_most: float) -> None:
    """A false rate: at most `at_most`, its Clopper-Pearson upper bound within 0.01 of it on the full run; the data
    must not show it above (the lower bound) on the cheap one."""
    if FULL:
        assert hits / PAIRS <= at_most and cp_upper(hits, PAIRS) <= at_most + 0.01, hits
    assert cp_lower(hits, PAIRS) <= at_most, hits


@pytest.mark.parametrize("noise", [0.08, 0.15])
@pytest.mark.parametrize("design", [full, typical])
def test_no_row_is_called_moved_when_nothing_changed_but_at_the_family_rate(design, noise):
    """Two studies of the same truth: P(any of the 16 rows moved) <= 5%; its 95th percentile of rows moved (issue
    50's k) is then 0."""
    found = verdicts(design, noise, 50)
    count = moved(found)
    _rate(int((count > 0).sum()), 0.05)
    if FULL:  # at the cheap count a sample at 5% puts it at 1 as often as not
        assert np.percentile(count, 95) == 0
    print(design.__name__, noise, int((count > 0).sum()), PAIRS, cp_upper(int((count > 0).sum()), PAIRS))


# Power to call one row moved by 15%, and the baseline's level slowed by 15%: the lower bounds the full run asserts
# (measured there, less the Clopper-Pearson slack) and the cheap run's floors.
POWER = {(full, 0.08): 0.38, (full, 0.15): 0.06, (typical, 0.08): 0.07, (typical, 0.15): 0.01}
LEVEL_POWER = {(full, 0.08): 0.60, (full, 0.15): 0.14, (typical, 0.08): 0.58, (typical, 0.15): 0.13}


@pytest.mark.parametrize("noise", [0.08, 0.15])
@pytest.mark.parametrize("design", [full, typical])
def test_a_row_moved_by_15_percent_is_called_moved(design, noise):
    shift = np.where(np.array(NAMES) == MOVING, SLOWER, 0.0)
    found = verdicts(design, noise, 51, shift=shift)
    hits = int(moved(found, {MOVING}).sum())
    others = int((moved(found, set(NAMES) - {MOVING} | {BASELINE_ABSOLUTE}) > 0).sum())
    print(design.__name__, noise, hits, PAIRS, cp_lower(hits, PAIRS), others)
    _power(hits, POWER[design, noise])
    # The others, false moved: not shown above 5% (typical at 0.08: 215 of 4,000, 5.4%, lower bound 4.8%; the
    # top rows, raced in one study and screened in the other, the most often)
    assert cp_lower(others, PAIRS) <= 0.05, others


@pytest.mark.parametrize("noise", [0.08, 0.15])
@pytest.mark.parametrize("design", [full, typical])
def test_a_baseline_slowed_by_15_percent_shows_in_the_absolute_row_alone(design, noise):
    """Every combination 15% slower in B: the speed-ups do not move, the absolute row does."""
    found = verdicts(design, noise, 52, level=SLOWER)
    hits = int(moved(found, {BASELINE_ABSOLUTE}).sum())
    print(design.__name__, noise, hits, PAIRS, cp_lower(hits, PAIRS))
    _power(hits, LEVEL_POWER[design, noise])
    _rate(int((moved(found, set(NAMES)) > 0).sum()), 0.05)
    assert all(c.ratio is not None and c.ratio < 1 for pair in found for c in pair if c.row == BASELINE_ABSOLUTE
               and c.verdict == MOVED)


def test_rows_moved_by_the_margin_are_not_called_the_same_but_at_the_family_rate():
    """At noise 0.01, where a row that did not move is shown the same, every row moved by exactly the margin (5%,
    alternately faster and slower; the level too): P(any row called same) <= alpha / 2 by the design."""
    edge = np.where(np.arange(len(NAMES)) % 2, 1, -1) * math.log1p(changes.DEFAULT_MARGIN)
    found = verdicts(full, 0.01, 53, shift=edge, level=math.log1p(changes.DEFAULT_MARGIN))
    wrong = sum(any(c.verdict == SAME for c in pair) for pair in found)
    print("false same", wrong, PAIRS, cp_upper(wrong, PAIRS))
    _rate(wrong, 0.025)
    same = [sum(c.verdict == SAME for c in pair) for pair in verdicts(full, 0.01, 54)]
    print("same when nothing moved", np.mean(same), len(NAMES) + 1)
    assert np.mean(same) > 0.5 * (len(NAMES) + 1)

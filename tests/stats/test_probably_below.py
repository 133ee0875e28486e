"""An `uncertain` group whose mean change is past the tolerance is probably below: never raced or recommended.

Why: a reproducibility pair (benchmarks/studies/repro16.yaml, tolerance 1 point) found batch_size(128) 2.1-2.2
points down in both runs, `below` in one ([-3.24, -1.25]) and `uncertain` in the other ([-4.17, +0.02], its own
spread widened it); eligibility read the verdict alone, so the second run recommended a stack holding it. The
simulations are tests/stats/test_decisions.py's parity studies (three groups beside the baseline, seed SD 0.15
points, tolerance 0.5, `seeds` 3), each rate bounded at 95% confidence (Clopper-Pearson).
"""
from __future__ import annotations

import math

from test_decisions import BASE, NOISY, _studies
from test_headline import cp_lower, cp_upper

from ablate.config.choices import BASELINE
from ablate.stats import parity
from ablate.stats.answer import verdicts
from ablate.store.records import Record

TOLERANCE = 0.5  # the simulations'


def _ineligible(found: list[parity.Parity]) -> int:
    return sum(p.ineligible for p in found)


def test_a_group_twice_the_tolerance_below_is_never_eligible():
    """At -1.0 (twice the tolerance) the verdict is `below` in 61.0% of these 4,000 studies, the rest `uncertain`,
    which was eligible: now ineligible in all 4,000 (three times noisier: 97.0%, where `below` alone was 26.5%).
    The verdicts stay as they were, and every probably-below group got its every seed: the parity race trains it as
    any `uncertain` one."""
    found = _studies(30, 4000, -1.0)
    assert cp_lower(_ineligible(found), len(found)) >= 0.99
    assert cp_upper(sum(p.below for p in found), len(found)) <= 0.70  # the rest are still `uncertain`
    noisy = _studies(31, 4000, -1.0, sd=NOISY)
    assert cp_lower(_ineligible(noisy), len(noisy)) >= 0.94
    probably = [p for p in found + noisy if p.probably_below]
    assert probably and all(p.verdict == parity.UNCERTAIN and p.seeds == 3 for p in probably)


def test_a_group_with_no_change_is_rarely_made_ineligible():
    """No true change: noise alike, never (0 of 4,000); three times noisier than the others, in 3.2% of 10,000
    studies (its mean paired change over three seeds has an SD of about 0.27 points, so it falls past -0.5 that
    often), where `below` alone kept it out in 0.01%."""
    quiet = _studies(32, 4000, 0.0)
    assert cp_upper(_ineligible(quiet), len(quiet)) <= 0.001
    noisy = _studies(33, 10_000, 0.0, sd=NOISY)
    assert cp_upper(_ineligible(noisy), len(noisy)) <= 0.045


def test_a_group_exactly_at_the_tolerance_is_eligible_about_half_the_time():
    """At the tolerance eligibility is a coin toss (52.0% of 4,000 and, three times noisier, 50.3%), where reading
    the verdict alone let it through in 99.9% (96.8%): `uncertain` holds every group whose interval straddles the
    cut, so eligibility read from the verdict alone kept out only what the interval put wholly past it."""
    for found in (_studies(34, 4000, -TOLERANCE), _studies(35, 4000, -TOLERANCE, sd=NOISY)):
        eligible = len(found) - _ineligible(found)
        assert cp_lower(eligible, len(found)) >= 0.45 and cp_upper(eligible, len(found)) <= 0.55


def _record(number: int, combination: str, rate: float, accuracy: float) -> Record:
    return Record(number, combination, {"x": combination if combination != BASELINE else "off"}, "complete",
                  metrics={"throughput": rate, "test_accuracy": accuracy, "throughput_window_0": rate},
                  accuracy_trained=True, accuracy_group=combination)


def test_uncertain_past_the_tolerance_is_neither_raced_nor_recommended():
    """The reproducibility pair's second run: batch_size(128) `uncertain` at -2.08 [-4.17, +0.02] with a tolerance
    of 1 is probably below; at -0.50 it is eligible, and recommended where it is the fastest."""
    records = [_record(0, BASELINE, 1000, 98.0), _record(1, "batch", 2000, 96.0), _record(2, "amp", 1500, 98.0)]
    same = parity.Parity(parity.OK, 0.0, 0.0, 0.0, 3, 0.0, math.inf, tolerance=1.0)
    far = parity.Parity(parity.UNCERTAIN, -2.08, -4.17, 0.02, 3, 1.0, 6, 4.0, tolerance=1.0)
    near = parity.Parity(parity.UNCERTAIN, -0.50, -1.40, 0.40, 3, 0.4, 6, tolerance=1.0)
    assert far.probably_below and far.ineligible and not far.below and far.label == "uncertain, probably below"
    for batch, kept in ((far, False), (near, True)):
        found = {BASELINE: same, "batch": batch, "amp": same}
        assert ("batch" in {r.combination for r in verdicts.eligible(records, 1.0, found)}) == kept
        assert ([r.combination for r in verdicts.parity_failures(records, 1.0, found)] == ["batch"]) != kept
        rec = verdicts.recommendation(records, 1.0, verdicts=found)
        assert rec is not None and (rec.leader.combination == "batch") == kept


def test_the_parity_race_still_trains_a_probably_below_group():
    """Uncertain and probably below at two seeds: it gets its third (and the baseline with it), deciding the
    answer or not, as every `uncertain` group does: a seed may move its estimate back within the tolerance."""
    accs = {BASE: {0: 99.0, 1: 99.1}, "g": {0: 98.0, 1: 98.8}, "h": {0: 99.05, 1: 99.1}, "k": {0: 98.95, 1: 99.1}}
    found = parity.verdicts(accs, BASE, TOLERANCE, 10_000)["g"]
    assert found.verdict == parity.UNCERTAIN and found.probably_below
    worth = {BASE: 2, "g": 2, "h": 2, "k": 2}
    for deciding in ({BASE, "g"}, {BASE}):
        step = parity.next_seed(accs, BASE, TOLERANCE, 10_000, 3, worth, deciding)
        assert step is not None and step[0] == 2 and step[1][:2] == [BASE, "g"]
    assert parity.next_seed({**accs, "g": {**accs["g"], 2: 98.2}, BASE: {**accs[BASE], 2: 99.0}}, BASE, TOLERANCE,
                            10_000, 3, {BASE: 3, "g": 3}, {BASE, "g"}) is None  # at `seeds`: it is done

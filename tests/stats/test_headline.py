"""The answer a user acts on, proven by simulation: the headline and its compose line, the interval beside each
printed decision, and the equivalence test that alone lets a simpler stack stand in for the race's leader.

Studies run through the project's own functions as the runner plans them (`run_study` of
tests/stats/test_decisions.py: screening, the race, its confirmation blocks), then
`ablate.stats.answer.comparison.compare` (the race replayed, the recommendation) and `ablate.render.summaries`
(summary.json's recommendation). Every rate is established at 95% confidence: a Clopper-Pearson bound over the studies,
never the point estimate alone.

Before this change (f9d2b97), on GRID at process noise 0.06 and 0.10 (100 studies each, the same seeds): the headline
(the simplest member of the set the race could not tell apart) was within 2% of the race leader's true speed-up in
15 and 11 studies (Clopper-Pearson lower bounds 0.095 and 0.063), was not the leader in 89 and 91, and fell short of
the true best by 7.0% and 9.7% on average (medians 4.8% and 7.4%); summary.json paired the leader's speed-up with
another combination's compose line in those 89 and 91. After it: within the margin in 100 and 99 studies (lower
bounds 0.970 and 0.953; the one miss: a simpler member falsely shown equivalent, which the equivalence test's 5%
allows), short of the true best by 0.5% and 1.6% on average, medians 0 (the leader itself is sometimes the
second best of a near tie). With the race going on past its planned blocks for a near tie at the top (c32972d):
within the margin in 100 and 100, short by 0.1% and 1.0% on average, for 87.7 measurements a study rather than 69.6.
With the margin derived from the design (5% here, the cap: three confirmation blocks show 8% at noise 0.06) and the
extra blocks only while they could change the answer (issue 47): within the printed margin in 100 and 100, short by
0.1% and 1.0% on average, 2 and 0 simpler members standing in, for 83.7 and 87.5 measurements (87.7 and 87.8).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from test_decisions import BASE, Host, as_records, run_study

from ablate.config.validate import StudyError
from ablate.render import answer, race, summaries
from ablate.render.report import Report
from ablate.stats import protocol
from ablate.stats.answer import comparison, verdicts
from ablate.stats.answer.comparison import DeviceComparisons
from ablate.stats.protocol import ProtocolSettings
from ablate.store.records import Record, combine

EFFECT = {"a": 1.35, "b": 1.08, "c": 1.05, "w": 1.00}  # mnist-like: one big win, two small ones, one that does nothing
MARGIN = 0.02  # a study's own margin, where a test needs one fixed (the default is derived: tests/stats/test_margin.py)


def _grid() -> dict[str, float]:
    """The 16 combinations of four techniques, labelled as ablate labels them ("a + b + c"), true log speed-ups."""
    truth = {BASE: 0.0}
    for bits in range(1, 16):
        on = [t for i, t in enumerate(EFFECT) if bits >> i & 1]
        truth[" + ".join(on)] = sum(math.log(EFFECT[t]) for t in on)
    return truth


GRID = _grid()
STUDIES = 100  # per noise level: 99 of 100 puts the Clopper-Pearson lower bound at 0.953


def cp_lower(hits: int, n: int) -> float:
    """The one-sided 95% Clopper-Pearson lower bound of a rate seen `hits` times in `n`."""
    return float(stats.beta.ppf(0.05, hits, n - hits + 1)) if hits else 0.0


def cp_upper(hits: int, n: int) -> float:
    """The one-sided 95% Clopper-Pearson upper bound of a rate seen `hits` times in `n`."""
    return float(stats.beta.ppf(0.95, hits + 1, n - hits)) if hits < n else 1.0


def _compose(r: Record) -> tuple[str, str]:
    return "from strategies import compose", f"stack = compose({r.combination})"


@pytest.fixture(scope="module")
def grid() -> dict[float, list[tuple[DeviceComparisons, dict]]]:
    """STUDIES studies of GRID at process noise 0.06 and 0.10, default protocol, compared as the report compares,
    each with summary.json's recommendation (compose lines stand-ins naming their combination)."""
    out: dict[float, list[tuple[DeviceComparisons, dict]]] = {}
    for sigma in (0.06, 0.10):
        out[sigma] = []
        for seed in range(STUDIES):
            ms, _ = run_study(GRID, dict.fromkeys(GRID, sigma), ProtocolSettings(), 1000 + seed)
            compared = comparison.compare(as_records(ms), 1.0, ProtocolSettings())[0]
            found = summaries.recommendation(compared, "samples", _compose)
            assert found is not None
            out[sigma].append((compared, found))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.06, 0.10])
def test_the_headline_is_truly_within_the_margin_of_the_race_leader(grid, sigma):
    """The recommended stack's true speed-up is within `equivalence_margin` of the race leader's in >= 95% of
    studies (Clopper-Pearson), and its mean shortfall from the true best is small (a one-sided 95% t bound)."""
    found = [c.recommendation for c, _ in grid[sigma]]
    assert all(found)
    within = sum(math.exp(GRID[r.leader.combination] - GRID[r.pick.combination]) - 1 <= r.margin + 1e-12
                 for r in found if r)
    best = max(GRID.values())
    short = np.array([1 - math.exp(GRID[r.pick.combination] - best) for r in found if r])
    bound = short.mean() + stats.t.ppf(0.95, len(short) - 1) * short.std(ddof=1) / math.sqrt(len(short))
    assert cp_lower(within, len(found)) >= 0.95, (within, len(found))
    assert bound <= 0.04, (short.mean(), bound)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.06, 0.10])
def test_summary_json_pairs_each_speedup_with_its_own_compose_line(grid, sigma):
    """summary.json's recommendation and each member of the set: one combination's speed-up, interval, parity and
    compose line, never one's speed-up beside another's code (before: 89 and 91 of 100 studies)."""
    for compared, found in grid[sigma]:
        rec = compared.recommendation
        assert rec is not None
        assert found["compose"][1] == f"stack = compose({found['combination']})"
        assert found["combination"] == rec.pick.combination
        assert found["speedup"] == pytest.approx(compared[found["combination"]].point)
        shown = [m for m in found["members"] if m["equivalence"] and m["equivalence"]["shown"]]
        assert found["combination"] == (found["leader"] if not shown else shown[0]["combination"])
        assert [m["combination"] for m in found["members"]] == found["set"]
        for m in found["members"]:
            assert m["compose"][1] == f"stack = compose({m['combination']})"
            assert m["speedup"] == pytest.approx(compared[m["combination"]].point)
            assert m["recommended"] == (m["combination"] == found["combination"])


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.06, 0.10])
def test_each_printed_decision_has_the_interval_that_decided_it_and_an_adjusted_p(grid, sigma):
    """Beside "could not tell these apart" the interval includes x1.00, beside "told apart and dropped" it excludes
    it, and summary.json's adjusted p is below 0.05 exactly when told apart. The pointwise 95% interval printed
    before excluded x1.00 beside "could not tell apart" in 104 of the 411 members listed at noise 0.06, 76 of 451
    at 0.10."""
    survived = dropped = contradicted = 0
    for compared, found in grid[sigma]:
        rec = compared.recommendation
        assert rec is not None
        for m in found["members"]:
            decision = m["against_leader"]
            if decision is None or decision["interval"] != "simultaneous":
                continue
            survived += 1
            assert not decision["told_apart"] and decision["low"] <= 1 <= decision["high"], decision
            assert decision["p_adjusted"] >= 0.05
            low, _ = rec.contrasts[m["combination"]].interval()
            contradicted += low > 0
        for e in found["eliminated"]:
            if e.get("told_apart"):
                dropped += 1
                assert e["low"] > 1 and e["p_adjusted"] < 0.05, e
        text = "\n".join(race.recommendation_lines(rec, compared.speedup_of, 1.0))
        assert "within ±" not in text and "Levene" not in text
    assert survived >= STUDIES and dropped >= STUDIES // 2, (survived, dropped)  # the checks ran
    assert contradicted > 0, "the pointwise intervals never contradicted a verdict here: the note below is stale"


@pytest.mark.slow
def test_the_leaders_confirmed_estimate_is_unbiased_and_covered(grid):
    """The recommendation rests on blocks its selection never saw: at each noise level the share of studies where
    the leader's confirmed estimate reads high is within 0.5 +- 0.129 (99% under no bias; a bias of 0.3 standard
    errors fails it about half the time at one noise level), and over both its 95% interval covers the truth
    (Clopper-Pearson lower bound >= 0.88). Pooled, because 100 studies at a true 95% fall below that bound 23% of
    the time: with the race stopping a settled tie early (issue 47) the 0.06 studies' leaders covered 93 of 100,
    and 376 of 400 with 300 more seeds (94%)."""
    hits = n = 0
    for sigma in (0.06, 0.10):
        high = 0
        for compared, _ in grid[sigma]:
            rec = compared.recommendation
            assert rec is not None and rec.speedup is not None and rec.confirmed
            e, truth = rec.speedup.estimate, GRID[rec.leader.combination]
            low, up = e.interval()
            hits += low <= truth <= up
            high += e.log > truth
        n += len(grid[sigma])
        assert abs(high / len(grid[sigma]) - 0.5) <= 2.58 * 0.5 / math.sqrt(len(grid[sigma])), (sigma, high)
    assert cp_lower(hits, n) >= 0.88, hits


class QuietHost(Host):
    """A quiet machine (a GPU's): little drift between measurements."""

    walk = 0.002


def _pair(gap: float, sigma: float, seed: int) -> verdicts.Recommendation:
    """"a + b" the fastest, "a" `gap` slower (a factor), two far slower: the recommendation on a quiet host."""
    truth = {BASE: 0.0, "a + b": math.log(1.3), "a": math.log(1.3 / gap), "b": 0.0, "c": math.log(0.95)}
    ms, _ = run_study(truth, dict.fromkeys(truth, sigma), ProtocolSettings(), 5000 + seed, QuietHost)
    found = verdicts.recommendation(as_records(ms), 1.0, ProtocolSettings(equivalence_margin=MARGIN))
    assert found is not None
    return found


@pytest.mark.slow
def test_a_simpler_member_truly_at_the_margin_stands_in_for_the_leader_at_most_5_percent_of_the_time():
    """The equivalence decision's error: "a" truly 2% slower than the leader "a + b" (the margin: the worst case for
    a test of "at most 2% slower") is recommended in its place in <= 5% of studies (Clopper-Pearson; seen: 2 of 200,
    in 62 of which it was tested: 100 before the race went on past its planned blocks, which now tells "a" apart
    from the leader in more of them)."""
    n = 200
    found = [_pair(1 + MARGIN, 0.01, seed) for seed in range(n)]
    stood_in = sum(r.leader.combination == "a + b" and r.pick.combination == "a" for r in found)
    assert sum("a" in r.equivalence for r in found) >= n // 4  # the test ran
    assert cp_upper(stood_in, n) <= 0.05, stood_in


def test_a_truly_equivalent_simpler_member_stands_in_for_the_leader_with_stated_power():
    """Power beside "shown within 2%": "a" truly as fast as "a + b" on a quiet host (process noise 0.5%). Where
    "a + b" leads, "a" is recommended in its place in >= 45% of studies (Clopper-Pearson; seen 31 of 41). At process
    noise 6-10% with three confirmation blocks, a default study's, a simpler member is almost never shown within 2%
    (GRID: 1 of 573 tested, and that one falsely: 5% slower): the margin is below what such a host resolves, and
    the leader is recommended."""
    found = [_pair(1.0, 0.005, seed) for seed in range(100)]
    led = [r for r in found if r.leader.combination == "a + b"]
    stood_in = sum(r.pick.combination == "a" for r in led)
    assert len(led) >= 30 and cp_lower(stood_in, len(led)) >= 0.45, (stood_in, len(led))
    assert all(r.pick.combination == "a" for r in found if r.leader.combination == "a")  # already the simplest


@pytest.mark.slow
def test_members_that_never_got_a_race_seat_are_named_with_their_screening_estimate(grid):
    """A field member never raced is neither told apart nor pending: before, it vanished from the answer."""
    named = 0
    for compared, found in grid[0.06]:
        rec = compared.recommendation
        assert rec is not None and rec.race is not None
        raced = {m for m in (rec.race.leader, *rec.race.contenders, *rec.race.eliminated)}
        assert not set(rec.not_raced) & raced
        for c in rec.not_raced:
            assert compared[c].speedup.estimate.phase == protocol.SCREEN
        named += len(rec.not_raced)
        assert [e["combination"] for e in found["not_raced"]] == list(rec.not_raced)
    assert named >= STUDIES


def _failed_accuracy_study() -> list[Record]:
    """A study whose screening measured throughput and whose every accuracy training failed (the baseline's
    included: out of memory while evaluating), so no accuracy group has a verdict."""
    truth = {BASE: 0.0, "a": math.log(1.3), "a + b": math.log(1.35)}
    ms, _ = run_study(truth, dict.fromkeys(truth, 0.02), ProtocolSettings(), 7)
    measured = [Record(i, m.combination, {"c": m.combination}, "complete", block=m.block, phase=m.phase,
                       metrics={"throughput": math.exp(m.log_throughput),
                                "throughput_window_0": math.exp(m.log_throughput)},
                       accuracy_group=BASE if m.combination == BASE else m.combination)
                for i, m in enumerate(ms)]
    failed = [Record(len(ms) + i, c, {"c": c}, "failed", reason="killed by the kernel (out of memory)",
                     block=-1, phase=protocol.PARITY, position=i, accuracy_group=c) for i, c in enumerate(truth)]
    return combine(measured + failed)


def test_a_study_whose_accuracy_could_not_be_measured_still_answers_on_speed(tmp_path: Path):
    """The baseline is always an answer: before, every combination without an accuracy was ineligible, and the run
    ended "recommended: none (no complete combination within the accuracy tolerance)"."""
    records = _failed_accuracy_study()
    compared = comparison.compare(records, 0.5, ProtocolSettings())[0]
    rec = compared.recommendation
    assert rec is not None and rec.accuracy_unmeasured and "out of memory" in rec.accuracy_unmeasured
    assert BASE in {r.combination for r in verdicts.eligible(records, 0.5)}
    text = "\n".join(race.recommendation_lines(rec, compared.speedup_of, 0.5))
    assert "Accuracy could not be measured" in text and "on speed alone" in text
    report = Report(device="cpu", folder=tmp_path, markdown=tmp_path / "r.md", html=tmp_path / "r.html",
                    summary_json=tmp_path / "s.json", plots=[], recommended=rec.pick, compose=_compose(rec.pick),
                    metrics={"recommended.speedup": 1.3}, leader=rec.leader.combination,
                    members=tuple(m.combination for m in rec.members),
                    lines=tuple(answer.terminal_lines(rec, compared.speedup_of)))
    shown = report.summary()
    assert "recommended: none" not in shown and "accuracy could not be measured" in shown
    assert max(len(line) for line in shown.splitlines() if "/" not in line) <= 100


def test_the_equivalence_margin_is_a_protocol_setting_with_a_clear_error():
    assert ProtocolSettings(equivalence_margin=0.05).equivalence_margin == 0.05
    for wrong in (2, 0.5, 0.0, -0.01):
        with pytest.raises(StudyError, match=r"protocol.equivalence_margin: .*0.02 = 2%"):
            ProtocolSettings(equivalence_margin=wrong)

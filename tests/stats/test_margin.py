"""The equivalence margin the design can show, and extra race blocks only where they can settle a tie (issue 47).

At 8% process noise three confirmation blocks show no margin below about 11% (a one-sided t bound at 5% on a
contrast whose block SD is 0.08 x sqrt(2)): the 2% margin of before never fired, and the race spent up to six extra
blocks of its leader and closest contender on ties no number of them could settle. Now the default margin is the
smallest the design can show, at most 5% (`ablate.stats.race.equivalence`), the report says when a margin is below that,
and the race goes on past its planned blocks only while the blocks left could tell the pair apart or show them
within the margin.

The equivalence test's error rates are simulated vectorized (every process's log throughput drawn at once; each
replicate's tests through `paired` and `simpler.equivalence_tests`, the code the report runs); the race's through
`run_study` of test_decisions.py. Every rate is established at 95% confidence (Clopper-Pearson). Full replicate
counts run with ABLATE_FULL_SIMULATIONS=1; the cheap versions always. Figures (full counts): in the docstrings.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from test_decisions import BASE, as_records, run_study
from test_headline import cp_lower, cp_upper
from test_repeat import REPRO

from ablate.config.design import ProtocolSettings
from ablate.config.validate import StudyError
from ablate.render import answer, race, summaries
from ablate.stats import protocol
from ablate.stats.answer import comparison
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.contrasts import Contrast, paired
from ablate.stats.race import equivalence, simpler
from ablate.stats.race.equivalence import Equivalence
from ablate.store.records import Record

FULL = bool(os.environ.get("ABLATE_FULL_SIMULATIONS"))
REPLICATES = 40_000 if FULL else 4_000
MODEL_DF = 40  # the variance model's degrees of freedom in a small study (its sources: every block's spreads)
CONFIRM = ProtocolSettings().confirm_blocks


def _sd(sigma: float) -> float:
    """One block's SD of a paired difference of two processes of log-throughput SD `sigma`."""
    return sigma * math.sqrt(2)


# 1. What a design can show.

def test_three_confirmation_blocks_at_8_percent_noise_show_no_margin_below_11_percent():
    """The issue's arithmetic: 11.3% with the variance model's spread (many degrees of freedom), 21% with the pair's
    own (two); 5% needs 15 blocks. A margin below that is said, naming the smallest and the blocks."""
    pair = Contrast("a", 0.0, _sd(0.08) / math.sqrt(CONFIRM), 200, CONFIRM, 1.0)
    design = equivalence.resolution(pair, CONFIRM, 0.05, None)
    assert design is not None and design.smallest == pytest.approx(0.113, abs=0.002)
    assert design.margin == equivalence.CAP and design.below and design.needed == 15
    own = equivalence.resolution(Contrast("a", 0.0, pair.se, 2, CONFIRM, 1.0), CONFIRM, 0.05, None)
    assert own is not None and own.smallest == pytest.approx(0.21, abs=0.01)
    set_by_study = equivalence.resolution(pair, CONFIRM, 0.05, 0.02)
    assert set_by_study is not None and set_by_study.margin == 0.02 and set_by_study.below
    said = set_by_study.describe()
    assert "the study's margin of 2% is below the smallest" in said and "11.4%" in said and "about 90 blocks" in said


def test_on_a_quiet_host_the_default_margin_is_the_smallest_the_design_shows():
    pair = Contrast("a", 0.0, _sd(0.005) / math.sqrt(CONFIRM), 200, CONFIRM, 1.0)
    design = equivalence.resolution(pair, CONFIRM, 0.05, None)
    assert design is not None and design.margin == pytest.approx(0.0067, abs=3e-4) and not design.below
    assert design.describe() == ""


def test_the_margin_is_derived_unless_the_study_sets_one_with_a_clear_error():
    assert ProtocolSettings().equivalence_margin is None
    assert ProtocolSettings(equivalence_margin=0.05).equivalence_margin == 0.05
    for wrong in (2, 0.5, 0.0, -0.01, "2%", True):
        with pytest.raises(StudyError, match=r"protocol.equivalence_margin: .*0.02 = 2%.*or null"):
            ProtocolSettings(equivalence_margin=wrong)


# 2. The equivalence test's error rates, vectorized.

def _tests(deltas: list[float], sigma: float, n: int, seed: int, margin: float | None = None,
           blocks: int = CONFIRM) -> tuple[np.ndarray, np.ndarray]:
    """`n` studies' equivalence tests of len(deltas) simpler members, member j truly `deltas[j]` slower than the
    leader (log), each on `blocks` confirmation blocks where every process's log throughput varies by `sigma`, and
    the variance model's estimate of a block difference's variance (MODEL_DF degrees of freedom). Returns whether
    each was shown within the margin (n, m) and the margin used (n)."""
    rng = np.random.default_rng(seed)
    m = len(deltas)
    leader = rng.normal(0.0, sigma, (n, 1, blocks))
    members = rng.normal(-np.asarray(deltas)[None, :, None], sigma, (n, m, blocks))
    model = _sd(sigma) ** 2 * rng.chisquare(MODEL_DF, n) / MODEL_DF
    shown, used = np.zeros((n, m), dtype=bool), np.zeros(n)
    names = [f"m{j}" for j in range(m)]
    for i in range(n):
        lead = dict(enumerate(leader[i, 0]))
        found = {c: (paired(lead, dict(enumerate(members[i, j])), c, (model[i], MODEL_DF)), protocol.CONFIRM)
                 for j, c in enumerate(names)}
        tested = simpler.equivalence_tests(found, margin)
        shown[i] = [tested[c].shown for c in names]
        used[i] = tested[names[0]].margin
    return shown, used


@pytest.mark.parametrize("sigma", [0.01, 0.08])
def test_simpler_members_more_than_the_margin_slower_are_headlined_at_most_5_percent_of_the_time(sigma):
    """The family over three members tested, each truly just past the margin the design derives (at 1% noise: the
    smallest it shows at the true noise and alpha / 3, 1.8%; at 8%: the 5% cap): any of them shown within the
    printed margin, and truly more than it slower (the headline, the simplest shown, is then more than the margin
    slower), at most 5% of studies (Clopper-Pearson upper bound). Seen (40,000 studies): 1.5% [1.4, 1.6] and 3.9%
    [3.8, 4.1]; one member alone at the 5% cap, 8% noise: 4.7% [4.6, 4.9]. At 0.9 to 1.5 times the derived margin
    (20,000 each, 1% and 3% noise): 0.1% to 2.3%."""
    pair = Contrast("a", 0.0, _sd(sigma) / math.sqrt(CONFIRM), MODEL_DF, CONFIRM, 1.0)
    design = equivalence.resolution(pair, CONFIRM, 0.05 / 3, None)
    assert design is not None
    delta = math.log1p(design.margin) + 1e-9
    shown, used = _tests([delta] * 3, sigma, REPLICATES, 11 if sigma < 0.05 else 12)
    wrong = int(np.sum(np.any(shown & (delta > np.log1p(used))[:, None], axis=1)))
    assert cp_upper(wrong, REPLICATES) <= 0.05, wrong


def test_a_study_margin_errs_at_most_its_alpha_too():
    """A study's own 2% on a quiet host (1%): three members truly 2% slower, shown at most 5% of studies (seen:
    4.1% [4.0, 4.3] of 40,000)."""
    delta = math.log(1.02) + 1e-9
    shown, used = _tests([delta] * 3, 0.01, REPLICATES, 13, margin=0.02)
    assert set(used) == {0.02}
    assert cp_upper(int(np.sum(np.any(shown, axis=1))), REPLICATES) <= 0.05


def test_a_truly_equal_simpler_member_is_shown_equivalent_with_stated_power():
    """Power beside it, one member truly as fast as the leader. At 8% noise on the study's three confirmation blocks
    (margin 5%, the cap: the design shows 11%) it is shown in 17.1% of studies (40,000; Clopper-Pearson 16.7-17.4%):
    what three blocks allow, said in the report. At 0.5% (a GPU; margin 0.69%, the smallest shown) in 50.2%
    [49.8, 50.6]: the derived margin is where an equal member's bound lands half the time."""
    noisy, _ = _tests([0.0], 0.08, REPLICATES, 14)
    quiet, margin = _tests([0.0], 0.005, REPLICATES, 15)
    hits, calm = int(noisy.sum()), int(quiet.sum())
    assert 0.15 <= cp_lower(hits, REPLICATES) and cp_upper(hits, REPLICATES) <= 0.23, hits
    assert 0.45 <= cp_lower(calm, REPLICATES) and cp_upper(calm, REPLICATES) <= 0.55, calm
    assert float(np.median(margin)) == pytest.approx(0.0067, abs=5e-4)


# 3. The race past its planned blocks: only where the blocks left could settle the tie.

TIE = {**REPRO, "amp": 0.16, "set_to_none + amp": 0.16}  # mnist_cnn's grid with set_to_none doing nothing beside amp
TIE_STUDIES = 60 if FULL else 6


def test_the_race_stops_where_more_blocks_could_not_tell_apart_and_the_leader_is_within_the_margin():
    """At 8% noise after eleven blocks, one left: a lead of 2% could not be told apart even at the 7.7% the data
    allow (the twelfth look needs 9.6%), and the other is at most 3.8% faster: settled. A lead of none leaves the
    other up to 5.9% faster: not. Fifteen percent on six blocks, six left: twelve could tell it apart."""
    se11, se6 = _sd(0.08) / math.sqrt(11), _sd(0.08) / math.sqrt(6)
    tie = Contrast("a", 0.02, se11, MODEL_DF, 11, 0.6)
    assert equivalence.bound(tie) == pytest.approx(math.exp(0.02 + 1.684 * se11), rel=1e-3)
    assert not equivalence.could_tell_apart(tie, 1, 0.0055, 2)
    assert equivalence.behind(tie, 0.05) == pytest.approx(math.expm1(1.684 * se11 - 0.02), rel=1e-3)
    assert equivalence.settled(tie, [tie], 1, 0.0055, 2, 0.05)
    level = Contrast("a", 0.0, se11, MODEL_DF, 11, 1.0)
    assert equivalence.behind(level, 0.05) > 0.05 and not equivalence.settled(level, [level], 1, 0.0055, 2, 0.05)
    assert not equivalence.settled(tie, [tie, level], 1, 0.0055, 3, 0.05)  # every member still in counts
    gap = Contrast("a", 0.15, se6, MODEL_DF, 6, 0.01)
    assert equivalence.could_tell_apart(gap, 6, 0.0055, 2) and not equivalence.settled(gap, [gap], 6, 0.0055, 2, 0.05)
    ahead = Contrast("a", 0.09, se6, MODEL_DF, 6, 0.2)  # a lead of 9% on six: the data allow 17%, twelve tell 10%
    assert equivalence.behind(ahead, 0.05) == 0.0 and equivalence.could_tell_apart(ahead, 6, 0.0055, 2)


def test_a_tie_more_blocks_cannot_settle_stops_early_with_its_bound():
    """mnist_cnn's set_to_none-only tie at 8% noise: the race took its six extra blocks (18 measurements) in all 60
    studies before (75.6 measurements a study); now it stops where more could not tell the two apart and the leader
    is within the margin of the rest: 11.0 race blocks rather than 12, 72.5 measurements (seeds 7000-7059), and
    says why with the bound of the tie. (Stopping where the blocks left could show neither apart nor equivalent,
    the gap as observed, saved all 18, 57.1 a study, and cost the near tie of test_repeat.py its targets.)"""
    planned, most = ProtocolSettings().race_blocks, ProtocolSettings().race_blocks + ProtocolSettings().extra_blocks
    early = 0
    for seed in range(TIE_STUDIES):
        _, standing = run_study(TIE, dict.fromkeys(TIE, 0.08), ProtocolSettings(), 7000 + seed)
        if planned <= standing.race_blocks < most and standing.contenders:
            early += 1
            assert "the leader is within 5% of every member still in" in standing.why, standing.why
        if standing.contenders:
            assert "(the data allow up to +" in standing.why or "shown within 5%" in standing.why, standing.why
    assert early >= (TIE_STUDIES // 4 if FULL else 1), early


# 4. The report: what leaving a technique out may cost, what the data allow, the warning.

def _rec(e: Equivalence, design: equivalence.Resolution | None, headline: str | None) -> Recommendation:
    records = {c: Record(i, c, {}, "complete") for i, c in enumerate(("a + b + c", "a"))}
    return Recommendation(leader=records["a + b + c"], speedup=None, members=tuple(records.values()), contrasts={},
                          eliminated=(), pending=(), race=None, parity=None,
                          headline=records[headline] if headline else None, equivalence={"a": e},
                          margin=e.margin, resolution=design)


def test_a_member_not_shown_is_said_so_with_what_the_data_allow_and_the_report_warns_of_the_margin_once():
    k = Contrast("a", 0.02, 0.06, MODEL_DF, CONFIRM, 0.7)
    design = equivalence.resolution(k, CONFIRM, 0.05, None)
    e = Equivalence(k, protocol.CONFIRM, 0.05, 0.05, math.exp(k.upper(0.05)), design)
    rec = _rec(e, design, None)
    text = "\n".join(race.recommendation_lines(rec, {}, 0.5))
    assert "not shown equivalent (the data allow up to +13%)" in text  # 12.9%: whole points from 10% (words.percent)
    assert text.count("below the smallest this design can show") == 1
    terminal = answer.terminal_lines(rec, {})
    assert not any("below the smallest" in line for line in terminal)  # the report's: the run's end is the answer
    assert all(len(x) <= 98 for x in terminal)


def test_the_techniques_a_headline_leaves_out_are_listed_with_what_they_may_cost():
    k = Contrast("a", -0.01, 0.004, MODEL_DF, CONFIRM, 0.1)
    e = Equivalence(k, protocol.CONFIRM, 0.05, 0.02, 1.004)
    rec = _rec(e, None, "a")
    assert rec.left_out == ("b", "c")
    text = "\n".join(race.recommendation_lines(rec, {}, 0.5))
    assert "Left out of the leader's stack: b and c, which may cost up to 0.4%" in text
    assert "left out of the leader's stack: b and c, which may cost up to 0.4%" in " ".join(
        answer.terminal_lines(rec, {}))


def test_summary_json_says_what_the_design_could_show_and_what_the_headline_leaves_out():
    ms, _ = run_study({BASE: 0.0, "a": math.log(1.3), "a + b": math.log(1.3)}, dict.fromkeys((BASE, "a", "a + b"),
                      0.08), ProtocolSettings(), 3)
    compared = comparison.compare(as_records(ms), 1.0, ProtocolSettings())[0]
    found = summaries.recommendation(compared, "samples", lambda r: ("", r.combination))
    assert found is not None and found["equivalence_margin"] == equivalence.CAP
    assert found["equivalence_design"]["margin_below_smallest"] is True
    assert found["equivalence_design"]["smallest_shown"] > 0.05
    assert found["left_out"]["techniques"] == list(compared.recommendation.left_out)

"""The race against two-level (bimodal) processes, and the flag that names them (issue 38, review item C3).

bf16 emulated on a CPU runs at one of two speeds about 40% apart, each fresh process drawing one with probability
1/2: +-0.17 in log throughput about its mean. A run of processes at one level gives a pair a large difference and a
small spread together, which the t and the studentized range test read as a gap: before the guard, a true two-way
tie of such a process and a normal one (SD 0.06) was broken in 205 of 2000 of these studies (10.3%, seeds 0-1999,
Clopper-Pearson upper bound 11.4%). The guard (`ablate.stats.contrasts`): on five shared race blocks or fewer a
contender is dropped only where its lead clears half the gap between the two levels too, or an exact sign-flip
test agrees; at the sixth, the range test alone, with screening's shared block in the pair's spread; on the blocks
past the planned six (`extra_race_blocks`), guarded again.

Studies run through `run_study` of tests/stats/test_decisions.py (screening, the race and its confirmation blocks,
as the runner plans them). Every rate is established at 95% confidence: a Clopper-Pearson bound, never the point
estimate alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from spread import spread
from test_decisions import BASE, SIGMA_RACE, Host, as_records, run_study
from test_headline import cp_lower, cp_upper

from ablate.config.design import ProtocolSettings
from ablate.render import answer, race, summaries
from ablate.stats import contrasts, flips
from ablate.stats.answer import comparison
from ablate.stats.contrasts import HALF_GAP, judged, paired
from ablate.stats.race import levels

LEVEL = 0.17  # half the gap between a two-level process's levels, log scale (measured: 40% apart)
STUDIES = 4000  # the tie's bound at about 4%: a Clopper-Pearson upper bound near 4.6%
TIE = {BASE: 0.0, "a": math.log(1.3), "b": math.log(1.3)}  # "a" runs at two levels, "b" is normal
TWO_SEATS = ProtocolSettings(race_blocks=6, contenders=2)


class TwoLevels(Host):
    """The simulated host, where combination "a" is a two-level process: each process +-LEVEL about its truth."""

    def offset(self, c: str) -> float:
        if c == "a":
            return LEVEL if self.rng.random() < 0.5 else -LEVEL
        return super().offset(c)


@dataclass(frozen=True)
class Study:
    broken: bool  # "a" or "b" declared apart from the leader (dropped, or screened out of the race)
    raced: frozenset[str]
    flagged: frozenset[str]  # the raced combinations the race's `two_level` names
    race_blocks: int


def _tie(seed: int) -> Study:
    """One two-way tie of "a" (two levels) and "b" (normal), two seats, six race blocks planned (and up to six more:
    a tie is rarely decided)."""
    _, standing = run_study(TIE, dict.fromkeys(TIE, SIGMA_RACE), TWO_SEATS, seed, TwoLevels)
    kept = {standing.leader, *standing.contenders}
    return Study(not {"a", "b"} <= kept, frozenset({*kept, *standing.eliminated} - {BASE}),
                 frozenset(standing.two_level), standing.race_blocks)


@pytest.fixture(scope="module")
def ties() -> list[Study]:
    """STUDIES ties (`_tie`), seeds 0 to STUDIES - 1, spread over the cores (tests/support/spread.py): the same
    studies as in one process, in half the time on 2 cores."""
    return spread(_tie, range(STUDIES))


@pytest.mark.slow
def test_a_tie_with_a_two_level_member_is_declared_broken_at_most_5_percent_of_the_time(ties):
    """Seen: 157 of 4000 (3.9%, upper bound 4.5%) with the blocks past the planned six while they could change the
    answer (issue 47; 203, over the bound, with confirmation left out of the race's variance model, which would
    keep a contender out that confirmation's spreads revive: tests/stats/test_decisions.py); 176 of 4000 (4.4%,
    upper bound 4.97%) when every tie took all six (guarded like the first
    five); 163 of 4000 (4.1%) when the race ended at six, mostly at the sixth race block, where a run of six processes
    at one level (3% of races) still looks like a gap, but for screening's share (13 of the first 2000, screened
    apart). Before the guard: 205 of 2000 (10.3%), 155 of them at the third to fifth race block. Unguarded, the blocks
    past the sixth broke it in 201 of 4000 (upper bound 5.6%)."""
    broken = sum(s.broken for s in ties)
    assert cp_upper(broken, len(ties)) <= 0.05, broken


@pytest.mark.slow
def test_the_two_level_flag_names_a_normal_combination_at_most_5_percent_of_the_time(ties):
    """The flag's false rate on "b" (normal noise, SD 0.06, raced): by construction about levels.FLAG_ALPHA; seen in
    104 of 3992 studies (2.6%; 108 when every tie took twelve race blocks, 105 when the race ended at six)."""
    raced = [s for s in ties if "b" in s.raced]
    flagged = sum("b" in s.flagged for s in raced)
    assert len(raced) >= 0.95 * len(ties)
    assert cp_upper(flagged, len(raced)) <= 0.05, (flagged, len(raced))


@pytest.mark.slow
def test_the_two_level_flag_names_the_two_level_process_in_most_studies(ties):
    """Its power on "a" from its blocks (screening's, up to twelve race blocks - a tie runs past the planned six
    while more blocks could change its answer - and the leader's three confirmation blocks): seen in 3201 of 3982
    studies (80%; 11.3 race blocks on average, issue 47); 82% when every such tie took all twelve, 53% when the race
    ended at six. Seven processes with a level drawn once or never show no two levels to any test, and two
    processes at a level are few to tell a level from chance."""
    raced = [s for s in ties if "a" in s.raced]
    flagged = sum("a" in s.flagged for s in raced)
    assert cp_lower(flagged, len(raced)) >= 0.75, (flagged, len(raced))


CLEAR = {BASE: 0.0, "w": math.log(1.5), "a": math.log(1.1), "b": math.log(1.05), "c": 0.0}  # w: 36% ahead at least


@pytest.mark.slow
def test_a_clear_winner_is_told_apart_and_mostly_before_the_last_race_block():
    """The guard's price: a leader 36% ahead of the next (process noise 0.06) is told apart from every other in all
    300 studies as before, but where it stopped after 3.9 race blocks on average before the guard (93, 132, 73 and 2
    of 300 after three, four, five and six), it now needs 5.1 (16, 71, 89 and 124): its lead must clear HALF_GAP
    (x1.18) plus the range's margin on five blocks or fewer. Established: told apart in 95% of studies or more, and
    stopped before the last race block in half of them or more."""
    n, told, early = 300, 0, 0
    for seed in range(n):
        _, standing = run_study(CLEAR, dict.fromkeys(CLEAR, SIGMA_RACE), ProtocolSettings(), seed)
        told += standing.leader == "w" and not standing.contenders
        early += standing.race_blocks < ProtocolSettings().race_blocks
    assert cp_lower(told, n) >= 0.95, told
    assert cp_lower(early, n) >= 0.5, early


def test_a_guarded_contrast_is_told_apart_exactly_when_the_interval_printed_beside_it_excludes_zero():
    """On five shared race blocks or fewer the decision is "the range test against a lead of HALF_GAP, or the range
    test and the sign-flip test both against none"; the interval printed beside it (`simultaneous`) and the
    adjusted p say the same, whichever decided."""
    rng = np.random.default_rng(3)
    decided = {"beyond the half gap": 0, "by the sign flips": 0, "not apart": 0}
    for _ in range(400):
        blocks = int(rng.integers(3, contrasts.GUARDED_BLOCKS + 1))
        lead = rng.choice([0.0, 0.1, 0.25, 0.4])
        other = {b: float(rng.normal(0, 0.05)) for b in range(blocks)}
        leader = {b: v + lead + float(rng.normal(0, 0.05)) for b, v in other.items()}
        seen = list(rng.normal(lead, 0.07, int(rng.integers(0, 12))))  # many shared screening blocks: flips decide
        model = (0.005, 40) if rng.random() < 0.5 else None
        alpha = float(rng.choice([0.00045, 0.0036, 0.01215, 0.05]))
        (c,) = judged([paired(leader, other, "x", model, seen)], alpha, 2)
        assert c.guarded
        low, high = c.simultaneous()
        assert c.apart == (low > 0) == (c.p_adjusted < contrasts.ALPHA), c
        half = contrasts.range_quantile(alpha, 2, c.df) / math.sqrt(2) * c.se
        decided["not apart" if not c.apart else "beyond the half gap" if c.diff - half > HALF_GAP else
                "by the sign flips"] += 1
    assert min(decided.values()) >= 10, decided  # each way of deciding was checked


def test_the_sign_flip_test_is_exact_and_its_interval_agrees_with_it():
    """All of one sign is the most extreme of 2**n patterns (and its mirror): p = 2 / 2**n, never below; a shift
    the interval leaves out is one the test rejects."""
    assert flips.sign_flip_p([0.1, 0.2, 0.15, 0.3, 0.12]) == 2 / 2 ** 5
    assert flips.sign_flip_p([0.1, -0.2, 0.15, 0.3, 0.12]) > 2 / 2 ** 5
    assert flips.sign_flip_interval([0.1, 0.2, 0.15, 0.3], 0.05) == (-math.inf, math.inf)  # 2/16 > 0.05
    rng = np.random.default_rng(4)
    for _ in range(200):
        x = rng.normal(rng.uniform(0, 0.3), 0.1, int(rng.integers(6, 10)))
        low, high = flips.sign_flip_interval(x, 0.05)
        assert (flips.sign_flip_p(x) <= 0.05) == (low > 0 or high < 0)
        assert low <= x.mean() <= high


def test_the_two_level_rule_separates_two_clusters_and_not_one_outlier():
    """Two processes or more at each level; normal samples exceed the critical separation FLAG_ALPHA of the time."""
    assert levels.two_levels([0.17, 0.16, 0.19, -0.17, -0.15, 0.18, -0.16])
    assert not levels.two_levels([0.17, 0.16, 0.19, -0.17, 0.15, 0.18, 0.16])  # one at the other level: no level
    assert not levels.two_levels([0.17, -0.17, 0.16])  # too few to say
    rng = np.random.default_rng(5)
    for n in (5, 7, 10):
        flagged = np.mean([levels.two_levels(rng.normal(0, 1, n)) for _ in range(2000)])
        assert flagged <= levels.FLAG_ALPHA + 0.015, (n, flagged)


@pytest.mark.parametrize("flagged", ["leader", "other member"])
def test_a_flagged_member_is_named_in_summary_json_and_beside_its_row(flagged):
    """Through the report's own path (`comparison.compare`, `summaries.recommendation`, `answer`): the flag is each
    member's `two_levels` in summary.json and a note beside its row, every terminal line within 100 columns."""
    for seed in range(200):
        ms, standing = run_study(TIE, dict.fromkeys(TIE, SIGMA_RACE), TWO_SEATS, seed, TwoLevels)
        if standing.contenders and ("a" == standing.leader) == (flagged == "leader") and "a" in standing.two_level:
            break
    else:
        raise AssertionError(f"no study of 200 flagged the {flagged}")
    compared = comparison.compare(as_records(ms), 1.0, TWO_SEATS)[0]
    rec = compared.recommendation
    found = summaries.recommendation(compared, "samples", lambda r: ("", f"stack = compose({r.combination})"))
    assert rec is not None and found is not None and rec.two_level == standing.two_level
    assert {m["combination"]: m["two_levels"] for m in found["members"]} == {c: c == "a" for c in found["set"]}
    terminal = answer.terminal_lines(rec, compared.speedup_of)
    report = "\n".join(race.recommendation_lines(rec, compared.speedup_of, 1.0))
    if flagged == "leader":
        assert terminal[0].startswith("its processes ran at two speed levels"), terminal
        assert "**a**:" in report and answer.TWO_LEVELS in report
    else:
        assert "  a: two speed levels" in terminal, terminal
        assert next(line for line in report.splitlines() if line.startswith("- **a**")).endswith("two speed levels.")
    assert all(len("  " + line) <= 100 for line in terminal), terminal

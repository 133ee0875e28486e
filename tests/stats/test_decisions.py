"""The decisions ablate prints, proven by simulation: parity verdicts, the recommendation, elimination, noise.

Each test runs hundreds of simulated studies (parity's, thousands) through the same functions the runner and the
report call (`ablate.stats.parity`, `ablate.stats.race.racing.race`, `ablate.stats.answer.verdicts.recommendation`,
`ablate.stats.protocol.estimates`) and checks an error rate or a coverage. The host: every measurement is a fresh
process, log throughput = truth + drift (a trend and a random walk) + a process offset N(0, sigma of its
combination) + small window noise.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.stats import parity, speedups
from ablate.stats.answer import verdicts
from ablate.stats.protocol import (
    RACE,
    SCREEN,
    Measurement,
    ProtocolSettings,
    Slot,
    estimates,
    race_plan,
    screening_plan,
)
from ablate.stats.race import racing
from ablate.store.records import Record, combine

BASE = "baseline"
TREND, WALK, SIGMA_W = -0.002, 0.01, 0.01


class Host:
    """A simulated shared machine; `sigma`: each combination's between-process SD (log scale)."""

    walk = WALK  # the random walk's SD per measurement

    def __init__(self, truth: dict[str, float], sigma: dict[str, float], seed: int) -> None:
        self.truth, self.sigma = truth, sigma
        self.rng = np.random.default_rng(seed)
        self.time, self.level = 0, 0.0

    def measure(self, slot: Slot) -> Measurement:
        self.level += self.rng.normal(0.0, self.walk)
        self.time += 1
        c = slot.combination
        y = self.truth[c] + TREND * self.time + self.level + self.offset(c)
        return Measurement(c, slot.block, slot.phase, float(np.mean(y + self.rng.normal(0.0, SIGMA_W, 3))))

    def offset(self, c: str) -> float:
        """This process's own offset from its truth (drawn otherwise in tests/stats/test_bimodal_race.py)."""
        return float(self.rng.normal(0.0, self.sigma[c]))


def run_study(truth: dict[str, float], sigma: dict[str, float], protocol: ProtocolSettings, seed: int,
              host_type: type[Host] = Host):
    """Screening, the race and its confirmation blocks, as the runner plans them: (measurements, final Race)."""
    host = host_type(truth, sigma, seed)
    ms = [host.measure(s) for s in screening_plan(list(truth), BASE, protocol, seed)]
    for _ in range(60):
        standing = racing.race(ms, BASE, set(truth), protocol)
        if standing.next_block is None:
            return ms, standing
        block = 1 + max(m.block for m in ms)
        phase = getattr(standing, "phase", RACE)
        ms += [host.measure(s) for s in race_plan(standing.next_block, BASE, block, seed, phase)]
    raise AssertionError("the race never stopped")


def as_records(ms: list[Measurement], groups: dict[str, str] | None = None) -> list[Record]:
    """Simulated measurements as the stored records the report reads (accuracy not measured: all eligible);
    `groups`: each combination's accuracy group."""
    out = [Record(i, m.combination, {"c": m.combination}, "complete", block=m.block, phase=m.phase,
                  metrics={"throughput": math.exp(m.log_throughput), "throughput_window_0": math.exp(m.log_throughput)},
                  accuracy_note="simulated", accuracy_group=(groups or {}).get(m.combination))
           for i, m in enumerate(ms)]
    return combine(out)


# 1. Accuracy parity: a three-way verdict over shared seeds, not one seed against a hard cut. Each rate is bounded at
# 95% confidence (Clopper-Pearson), over enough studies that the bound holds where the rate does.

ONE_SEED = {"fillers": 2, "third seeds": 3}  # how the others give the spread its NOISE_DF: the seeds each trains to
QUIET, NOISY = 0.15, 0.45  # seed SDs in points: MNIST's baseline moves by about 0.13; a group three times noisier
AT_MOST = 0.035  # an error at the tolerance: nominal 2.5% (one side of a 95% interval)


def _parity_study(rng: np.random.Generator, change: float, sd: float = QUIET, others_sd: float = QUIET,
                  noisy: tuple[str, ...] = (), tolerance: float = 0.5, one_seed: str | None = None) -> parity.Parity:
    """Baseline (seed SD `QUIET`) and other groups (`others_sd`; `NOISY` those in `noisy`: "h", "k"), one ("g") at
    `change` with seed SD `sd`: every group's accuracy N(truth, its SD) at each seed; the parity race adds seeds
    as the runner does (`seeds` 3). The verdict of the group at `change`. `one_seed`: that group gets no more seeds
    (not a finalist: `finalists.seeds_wanted`), and the others give the spread its `parity.NOISE_DF` degrees of
    freedom: four slower groups at two seeds, none of which decides the answer ("fillers"), or two at three
    ("third seeds")."""
    others = {"h": 99.0, "k": 98.9, **({"m": 99.1, "n": 98.95} if one_seed == "fillers" else {})}
    truth = {BASE: 99.0, "g": 99.0 + change, **others}
    sds = {BASE: QUIET, "g": sd, **{o: NOISY if o in noisy else others_sd for o in others}}
    worth = None if one_seed is None else {BASE: parity.MIN_SEEDS, **dict.fromkeys(others, ONE_SEED[one_seed])}
    deciding = {BASE} if one_seed == "fillers" else None
    accs: dict[str, dict[int, float]] = {g: {0: t + rng.normal(0, sds[g])} for g, t in truth.items()}
    while step := parity.next_seed(accs, BASE, tolerance, 10_000, ProtocolSettings().seeds, worth, deciding):
        index, groups = step
        for g in groups:
            accs[g][index] = truth[g] + rng.normal(0, sds[g])
    return parity.verdicts(accs, BASE, tolerance, 10_000)["g"]


def _studies(seed: int, n: int, change: float, **kwargs) -> list[parity.Parity]:
    rng = np.random.default_rng(seed)
    return [_parity_study(rng, change, **kwargs) for _ in range(n)]


def _upper(found: list[parity.Parity], verdict: str) -> float:
    """The 95% Clopper-Pearson upper bound of the share of `found` with `verdict`."""
    k, n = sum(p.verdict == verdict for p in found), len(found)
    return float(stats.beta.ppf(0.95, k + 1, n - k)) if k < n else 1.0


def _lower(found: list[parity.Parity], verdict: str) -> float:
    k, n = sum(p.verdict == verdict for p in found), len(found)
    return float(stats.beta.ppf(0.05, k, n - k + 1)) if k else 0.0


def test_parity_at_the_tolerance_errs_either_way_at_most_as_the_interval_allows():
    """A group exactly at the tolerance, noise alike everywhere: `ok` and `below` at most 3.5% each (nominal 2.5%;
    measured 0.8% and 0.1%; the spread pooled alone: 2.1% and 0.4%). Its intervals cover the change."""
    found = _studies(10, 4000, -0.50)
    assert _upper(found, parity.OK) <= AT_MOST
    assert _upper(found, parity.BELOW) <= AT_MOST
    assert sum(p.low <= -0.50 <= p.high for p in found) / len(found) >= 0.95


@pytest.mark.slow
def test_a_group_three_times_noisier_is_judged_on_its_own_spread():
    """The group at the tolerance has three times the others' seed SD: the spread pooled alone passed it `ok` in
    10.4% of these studies (and flagged it `below` at -0.40 in 3.7%, passed it at -0.60 in 5.5%). Now `ok` at most
    3.5% (measured 2.6%; the pooled variance times its F, the rule before: 3.0%), and within the tolerance
    `below`, beyond it `ok`, too (1.9%, 1.3%)."""
    at = _studies(11, 20_000, -0.50, sd=NOISY)
    assert _upper(at, parity.OK) <= AT_MOST
    assert sum(p.widened > 1 for p in at) / len(at) >= 0.5  # its own spread, read against the others', widened it
    assert _upper(_studies(12, 5000, -0.40, sd=NOISY), parity.BELOW) <= AT_MOST
    assert _upper(_studies(13, 5000, -0.60, sd=NOISY), parity.OK) <= AT_MOST


def test_two_noisy_groups_do_not_hide_each_other():
    """The group at the tolerance and one other three times noisier, the third quiet: the others' spread it is read
    against is noisier too (measured 1.9%; the rule before: 2.4%; the spread pooled alone: 6.9%)."""
    assert _upper(_studies(14, 10_000, -0.50, sd=NOISY, noisy=("h",)), parity.OK) <= AT_MOST


def test_a_quiet_group_among_noisy_ones_is_not_judged_on_its_own_narrow_spread():
    """The others three times noisier than the group judged: the pooled variance is too big for it and its own
    spread, narrower, widens nothing, so at the tolerance it errs less either way, not more (about 0.1%; read on
    its own spread at the pooled degrees of freedom it would pass in about 2.8%). It pays in power: `ok` at no
    change in 36% of studies (the rule before: 39%; the spread pooled alone: 46%): the noisy others' own variances
    take their seeds, and so the spread's degrees of freedom, differently."""
    at = _studies(15, 4000, -0.50, others_sd=NOISY)
    assert _upper(at, parity.OK) <= AT_MOST and _upper(at, parity.BELOW) <= AT_MOST
    assert _lower(_studies(17, 2000, 0.0, others_sd=NOISY), parity.OK) >= 0.34


def test_parity_passes_groups_with_no_change_and_flags_those_clearly_below():
    """Power, noise alike everywhere: `ok` at no change in 69% of studies (the rule before: 70%; the spread pooled
    alone: 91%, which a three times noisier group paid for; no rule at three seeds both holds that group to 3% and
    passes more than about 71%: ablate.stats.parity), `below` at -1.0 in 62% (64%; pooled alone: 81%), at -1.5 in
    99% (96%; 100%)."""
    assert _lower(_studies(18, 10_000, 0.0), parity.OK) >= 0.67
    assert _lower(_studies(19, 4000, -1.0), parity.BELOW) >= 0.60
    assert _lower(_studies(20, 2000, -1.5), parity.BELOW) >= 0.94


@pytest.mark.slow
@pytest.mark.parametrize("one_seed", list(ONE_SEED), ids=["kept at one seed, others at two",
                                                         "kept at one seed, others at three"])
def test_a_group_kept_at_one_seed_is_judged_on_the_others_spread(one_seed):
    """A group not worth more seeds has no spread of its own: it is judged on the pooled one, unwidened, at the
    others' degrees of freedom, as if its noise were theirs (which one seed cannot check: three times noisier, it
    passes at the tolerance in 15-16%; such a group is slower than the baseline and decides nothing)."""
    within = _studies(21, 4000, -0.40, one_seed=one_seed)
    assert all(p.seeds == 1 and p.widened == 1 and p.df >= parity.NOISE_DF for p in within)
    assert _upper(within, parity.BELOW) <= AT_MOST
    assert _upper(_studies(22, 4000, -0.50, one_seed=one_seed), parity.OK) <= AT_MOST
    assert _upper(_studies(23, 4000, -0.60, one_seed=one_seed), parity.OK) <= AT_MOST
    assert _lower(_studies(24, 2000, 0.0, one_seed=one_seed), parity.OK) >= 0.4


def test_the_race_passes_a_deciding_group_only_on_three_seeds_and_trains_no_filler_for_it():
    """`ok` at two seeds rests on one degree of freedom of its own: a group that decides the answer gets its third
    seed (and the baseline with it) whatever its verdict at two, unless it is `below`; a slower group trained for
    the spread alone keeps its two."""
    accs = {BASE: {0: 99.0, 1: 99.1}, "g": {0: 99.0, 1: 99.1}, "h": {0: 99.05, 1: 99.1}, "k": {0: 98.95, 1: 99.1}}
    assert parity.verdicts(accs, BASE, 0.5, 10_000)["g"].verdict == parity.OK
    worth = {BASE: 2, "g": 2, "h": 2, "k": 2}
    assert parity.next_seed(accs, BASE, 0.5, 10_000, 3, worth, {BASE, "g"}) == (2, [BASE, "g"])
    assert parity.next_seed(accs, BASE, 0.5, 10_000, 2, worth, {BASE, "g"}) is None  # seeds: 2 allows no third
    broken = {**accs, "g": {0: 90.0, 1: 90.1}}
    assert parity.verdicts(broken, BASE, 0.5, 10_000)["g"].verdict == parity.BELOW
    assert parity.next_seed(broken, BASE, 0.5, 10_000, 3, worth, {BASE, "g"}) is None


# 2. The recommendation is the race's leader, and its estimate survives its selection. (Multi-technique labels, where
# a simpler member may stand in for the leader, on a 16-combination grid: tests/stats/test_headline.py.)

TIE4 = {BASE: 0.0, "a": math.log(1.3), "b": math.log(1.3), "c": math.log(1.3), "d": math.log(1.3),
        "e": math.log(1.1), "f": math.log(1.0), "g": math.log(0.9)}


@pytest.mark.slow
def test_the_recommendation_is_the_race_leader_unbiased_and_covered():
    """A four-way tie: the leader is the luckiest of four, yet its confirmed estimate is unbiased (the share of
    studies where it reads high is within 0.5 +- 0.118, 99% under no bias: a bias of 0.3 standard errors fails it
    about half the time; the grid's 200 studies test it more sharply) and covered (Clopper-Pearson lower bound of
    the coverage >= 0.88)."""
    n, hits, high = 120, 0, 0
    for seed in range(n):
        ms, standing = run_study(TIE4, dict.fromkeys(TIE4, 0.08), ProtocolSettings(), seed)
        records = as_records(ms)
        found = verdicts.recommendation(records, 1.0)
        assert found is not None and found.leader.combination == found.pick.combination == standing.leader
        s = speedups.speedup_of(records)[standing.leader]
        low, high_ = s.estimate.interval()
        hits += low <= TIE4[standing.leader] <= high_
        high += s.estimate.log > TIE4[standing.leader]
    assert abs(high / n - 0.5) <= 2.58 * 0.5 / math.sqrt(n), high
    assert stats.beta.ppf(0.05, hits, n - hits + 1) >= 0.88, hits


# 3. Elimination by paired contrasts, with the comparisons and the looks controlled.

SIGMA_RACE = 0.06  # between-process SD of the race simulations (a quiet host: the baseline moved 3-8%)


def _two(ratio: float, seed: int) -> bool:
    """Two contenders `ratio` apart (and two slower combinations): whether the race told the slower one apart and
    dropped it, the faster leading (not any exit of either: eliminating the faster, or never racing it, is no
    success)."""
    truth = {BASE: 0.0, "a": math.log(1.5), "b": math.log(1.5 / ratio), "c": math.log(1.0), "d": math.log(0.9)}
    sigma = {c: SIGMA_RACE for c in truth}
    _, standing = run_study(truth, sigma, ProtocolSettings(race_blocks=6, contenders=2), seed)
    return standing.leader == "a" and "b" in standing.eliminated


@pytest.mark.slow
@pytest.mark.parametrize("ratio, power", [(1.13, 0.74), (1.15, 0.83)])
def test_two_contenders_13_or_15_percent_apart_are_told_apart_by_the_race(ratio, power):
    """The power beside "told apart and dropped", established (Clopper-Pearson lower bound over 300 races; seen:
    85% at 13%, 93% at 15% with up to six blocks past the six planned, `extra_race_blocks`; at the six alone 67% and
    80% with the guard against two-level processes of test_bimodal_race.py, 68% and 79% without). 236 and 261 of 300
    (lower bounds 0.744, 0.834) since issue 47: the race no longer resumes after its confirmation, and where the
    confirmation blocks' spreads revive a contender the last look had dropped (a pair that looked apart on the race's
    noise alone), that contender is listed as not told apart, on all the evidence. Resuming gave 256 and 278 but
    could change the leader after its confirmation (its headline from race blocks: test_protocol.py's coverage
    fails); leaving confirmation out of the race's variance model gave 255 and 280 but broke a tie with a two-level
    member in 203 of 4000 races, over test_bimodal_race.py's 5% bound. The bound bought with these 20 of 300."""
    n = 300
    told = sum(_two(ratio, seed) for seed in range(n))
    assert stats.beta.ppf(0.05, told, n - told + 1) >= power, told


def _tie(ways: int, seed: int) -> bool:
    """`ways` contenders truly tied at x1.30 (and two slower combinations), raced with a seat for each: whether
    any of them was declared apart from the leader (never raced, or dropped out)."""
    tied = {f"t{i}": math.log(1.3) for i in range(ways)}
    truth = {BASE: 0.0, **tied, "c": math.log(1.0), "d": math.log(0.9)}
    _, standing = run_study(truth, {c: SIGMA_RACE for c in truth}, ProtocolSettings(race_blocks=6, contenders=ways),
                            seed)
    return not set(tied) <= {standing.leader, *standing.contenders}


@pytest.mark.slow
@pytest.mark.parametrize("ways, studies", [(2, 800), (6, 300)])
def test_a_true_tie_is_declared_broken_at_most_5_percent_of_the_time_over_the_whole_race(ways, studies):
    """Established: the Clopper-Pearson upper bound of the rate is at most 5% (seen: 2.6% of 800 two-way ties with the
    blocks past the planned six, 2.4% without, 3.3% before the guard against two-level processes of
    test_bimodal_race.py; 200 could not establish it). Six ways (seen: 0.7% of 300, 1% without the extra blocks, 2%
    before the guard): the leader is the luckiest of six, which Holm's procedure on "leader against each" ignores (it
    broke this tie in 14% of races; the overlap rule before it in 9%)."""
    broken = sum(_tie(ways, seed) for seed in range(studies))
    assert stats.beta.ppf(0.95, broken + 1, studies - broken) <= 0.05, broken


# 4. Noise per combination: noisier techniques get wider intervals even when screened once.

def _hetero_truth() -> tuple[dict[str, float], dict[str, float]]:
    """16 combinations of four techniques; every amp combination fast and noisy (SD 0.158), the rest quiet (0.099)."""
    truth, sigma = {BASE: 0.0}, {BASE: 0.099}
    for bits in range(1, 16):
        on = [t for i, t in enumerate(("w", "b", "s", "amp")) if bits >> i & 1]
        name = " + ".join(on)
        truth[name] = math.log(1.3 + 0.02 * bits) if "amp" in on else math.log(0.95 + 0.02 * bits)
        sigma[name] = 0.158 if "amp" in on else 0.099
    return truth, sigma


@pytest.mark.slow
def test_noisy_and_quiet_screened_combinations_are_both_covered_near_95_percent():
    truth, sigma = _hetero_truth()
    hits = {True: [0, 0], False: [0, 0]}
    for seed in range(100):
        ms, _ = run_study(truth, sigma, ProtocolSettings(), seed)
        for c, e in estimates(ms, BASE).items():
            if c == BASE or e.phase != SCREEN or e.interval() is None:
                continue
            low, high = e.interval()
            hits[sigma[c] > 0.1][0] += low <= truth[c] <= high
            hits[sigma[c] > 0.1][1] += 1
    noisy, quiet = (hits[k][0] / hits[k][1] for k in (True, False))
    assert hits[True][1] >= 100 and hits[False][1] >= 300, hits  # about 3 and 7 per study
    assert noisy >= 0.90, noisy
    assert quiet <= 0.985, quiet


def test_the_studentized_range_quantile_matches_statsmodels_and_is_the_t_test_for_two():
    from scipy import stats
    from statsmodels.stats.libqsturng import qsturng

    from ablate.stats.contrasts import range_quantile

    for k, df in ((2, 5), (3, 4), (6, 10), (7, 200)):
        assert range_quantile(0.05, k, df) == pytest.approx(qsturng(0.95, k, df), rel=2e-3)
    assert range_quantile(0.05, 2, 7) == pytest.approx(math.sqrt(2) * stats.t.ppf(0.975, 7))
    # Its own quadrature (scipy's integrates with nquad, 10x slower) against scipy's, at the small alphas a race's
    # early looks spend.
    for alpha, k, df in ((0.00045, 6, 5), (0.001, 4, 2), (0.0045, 6, 30), (0.02, 8, 1000), (0.01, 3, 1)):
        assert range_quantile(alpha, k, df) == pytest.approx(stats.studentized_range.ppf(1 - alpha, k, df), rel=1e-6)

"""The measurement protocol: randomized blocks, racing, and the one speed-up estimator.

Why: a throughput measured in one process moves by tens of percent from one
process to the next on a shared machine (drift, neighbours, clocks), far more
than the timed windows inside one process vary. So the unit of repetition is
the process, and every speed-up is a ratio against a baseline measured close
in time (Kalibera & Jones, ISMM 2013: repeat at the level where the variance
is; Abedi & Brecht, ICPE 2017: randomized interleaving).

- **Blocks.** Screening measures every combination once, in blocks of
  `block_size` combinations plus the baseline twice, each block in its own
  random order (seeded: `seed` and the block number). A combination's
  speed-up is the mean over its blocks of (its log throughput - the mean of
  the same block's baselines), so drift between blocks cancels, and a lucky
  or unlucky baseline process moves a block by half as much.
- **Racing** (F-Race, irace): after screening, only the contenders - the leader
  among the combinations within the accuracy tolerance, and those whose
  interval still reaches the leader's - are measured again, in race blocks of
  their own with their own baseline, until the leader is distinguishable
  from every other (after at least `MIN_RACE_BLOCKS`) or `race_blocks` is
  reached. Contenders only drop out.
- **One estimator.** A raced combination's speed-up comes from its race
  blocks only: choosing it from the screening data does not inflate it
  (winner's curse). Any other from its screening block(s).
- **Intervals from between-process noise** (`process_noise`): the spread of
  the paired differences of every combination measured in several blocks
  (the raced ones), and the spread of the two baselines within each
  screening block, pooled, give the variance of one process's log
  throughput, with degrees of freedom from the number of blocks. Neither
  source contains drift between blocks. A combination's standard error
  follows from it and the blocks it ran in; its interval is a t interval.
  Its `noise` says which sources there were: "paired" (raced combinations
  among them) or "baseline" (the baselines' spread within blocks only);
  with neither (one baseline, no repeats) there is no interval ("none").
  One measured in several blocks combines the model's variance with its own
  spread, pooled over its phases ("moderated": Smyth 2004's moderated
  variance, the prior's weight capped at `PRIOR_DF`), or takes its own alone
  where an F test says it is noisier than the model ("own"): noise differs
  between combinations beyond what the model by technique can say.

Pure functions over plain data: the runner feeds them stored measurements,
and the tests feed them simulated ones.
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, Iterable, Sequence, TypeVar

from scipy import stats

# The phases and the intervals' level have one home, beside the settings (ablate.config.design); the statistics read
# them from here too. CONFIRM: after the race, the leader's estimate from blocks its selection never saw.
from ablate.config.design import CONFIDENCE as CONFIDENCE
from ablate.config.design import CONFIRM as CONFIRM
from ablate.config.design import FULL as FULL
from ablate.config.design import MIN_RACE_BLOCKS as MIN_RACE_BLOCKS  # the race's, beside the settings it bounds
from ablate.config.design import PARITY as PARITY
from ablate.config.design import RACE as RACE
from ablate.config.design import SCREEN as SCREEN
from ablate.config.design import TABLE as TABLE
from ablate.config.design import TRAININGS as TRAININGS
from ablate.config.design import ProtocolSettings
from ablate.stats import variance
from ablate.stats.contrasts import (
    NOISIER_ALPHA,  # one test of "noisier than the model": the race's pairs' too
    SCREEN_ALPHA,
    beyond_range,
)

MIN_POOLED_DF = 2  # fewer pooled degrees of freedom: fall back on the baseline's spread
PRIOR_DF = 5  # the variance model's prediction counts as at most this many degrees of freedom of an own spread

Key = TypeVar("Key", bound=Hashable)  # a combination, as the caller names it (a label, levels, a test's int)


@dataclass(frozen=True)
class Slot(Generic[Key]):
    """One planned measurement: a combination in a block, at a position in its random order."""

    combination: Key
    block: int
    position: int
    phase: str


@dataclass(frozen=True)
class Measurement(Generic[Key]):
    combination: Key
    block: int
    phase: str
    log_throughput: float  # mean log throughput of the process's timed windows


def _ordered(block: int, members: Sequence[Key], phase: str, seed: int) -> list[Slot[Key]]:
    order = list(members)
    random.Random(f"{seed}:{block}").shuffle(order)  # str seeds hash deterministically across processes
    return [Slot(c, block, i, phase) for i, c in enumerate(order)]


def screening_plan(runnable: Sequence[Key], baseline: Key, protocol: ProtocolSettings, seed: int,
                   unrunnable: Sequence[Key] = (), first: int = 0) -> list[Slot[Key]]:
    """The screening blocks (or every full block). `unrunnable` combinations (skipped on this machine) take no
    time, so they join the first block without counting towards its size. `first`: the first block's number (a
    fold-over's blocks follow screening's, `ablate.stats.planner`), its own random assignment to blocks."""
    others = [c for c in runnable if c != baseline]
    if protocol.full_blocks:
        return [s for b in range(protocol.full_blocks) for s in
                _ordered(b, [baseline, *others, *(unrunnable if b == 0 else ())], FULL, seed)]
    random.Random(f"{seed}:assign" + (f":{first}" if first else "")).shuffle(others)
    size = protocol.block_size
    chunks = [others[i:i + size] for i in range(0, len(others), size)] or [[]]
    # Two baselines per screening block: a lucky or unlucky baseline process moves every screened
    # combination of its block, by half as much with two; and their difference measures a process's noise.
    return [s for b, chunk in enumerate(chunks) for s in
            _ordered(first + b, [*[baseline] * protocol.screen_baselines, *chunk, *(unrunnable if b == 0 else ())],
                     SCREEN, seed)]


@dataclass(frozen=True)
class Estimate:
    """A combination's speed-up over the baseline on the log scale, with what its interval rests on."""

    log: float
    se: float | None  # standard error of `log`; None when nothing estimates the noise
    df: int
    blocks: int  # blocks its estimate comes from
    phase: str  # SCREEN, RACE or FULL: which blocks
    noise: str  # "moderated" (the model's variance and its own blocks' spread combined), "own" (its own spread
    # alone: noisier than the model), "model" (by technique), "paired" (pooled, raced combinations among the
    # sources), "baseline" (the baselines' spread within blocks only), "none", or MODELLED (not its own reading: the
    # screening model's prediction, `ablate.stats.screening.factorial`)

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        if self.se is None:
            return None
        if self.se == 0:
            return self.log, self.log
        half = stats.t.ppf(0.5 + confidence / 2, self.df) * self.se
        return self.log - half, self.log + half

    @property
    def point(self) -> float:
        return math.exp(self.log)


MODELLED = "screening model"  # an Estimate's noise where it is the screening model's prediction
BASELINE_ESTIMATE = Estimate(0.0, 0.0, 0, 0, SCREEN, "paired")  # x1.00 by definition


def screened_apart(first: Estimate, other: Estimate, k: int) -> bool:
    """Screening told `other` apart from the screening leader `first`: the race's first look, at SCREEN_ALPHA over
    all `k` screened combinations (the leader is the luckiest of them, so the studentized range, as in the race).
    Their estimates may come from different blocks: the difference's variance is the sum of theirs (conservative
    where they share a block's baseline)."""
    if first.se is None or other.se is None:
        return False
    se, diff = math.hypot(first.se, other.se), first.log - other.log
    df = max(1, min(e.df for e in (first, other)))
    return beyond_range(diff, se, df, SCREEN_ALPHA, max(2, k))


def _by_block(measurements: Iterable[Measurement[Key]]) -> dict[Key, dict[int, tuple[str, list[float]]]]:
    """combination -> block -> (phase, its log throughputs in that block); accuracy trainings left out."""
    acc: dict[Key, dict[int, tuple[str, list[float]]]] = {}
    for m in measurements:
        if m.phase not in TRAININGS:
            acc.setdefault(m.combination, {}).setdefault(m.block, (m.phase, []))[1].append(m.log_throughput)
    return acc


def _pairs(ys: dict[Key, dict[int, tuple[str, list[float]]]], c: Key, baseline: Key,
           phase: str | None = None) -> tuple[str, list[tuple[float, int]]]:
    """The phase an estimate of `c` uses (confirmation, else race, else any; or `phase`), and per block its
    difference from the mean of the block's baselines with the number of those baselines."""
    base = ys.get(baseline, {})
    mine = {b: v for b, v in ys.get(c, {}).items() if b in base}
    if phase is None:
        phase = next((p for p in (CONFIRM, RACE) if any(v[0] == p for v in mine.values())),
                     next((p for p, _ in mine.values()), SCREEN))
    use = {b: v for b, v in mine.items() if v[0] == phase}
    return phase, [(statistics.fmean(y) - statistics.fmean(base[b][1]), len(base[b][1]))
                   for b, (_, y) in sorted(use.items())]


def _var(xs: Sequence[float]) -> float:
    """The sample variance in floats (statistics.variance computes in exact fractions: 10x slower, and the race
    recomputes every estimate at each of its steps)."""
    mean = sum(xs) / len(xs)
    return sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def _own_noise(pairs: list[tuple[float, int]]) -> float:
    """One combination's own process variance, from its paired differences across blocks (needs two)."""
    ds = [d for d, _ in pairs]
    scale = statistics.fmean(1 + 1 / n for _, n in pairs)  # var(d) = sigma^2 (1 + 1/baselines)
    return _var(ds) / scale


def _own_spread(ys: dict[Key, dict[int, tuple[str, list[float]]]], c: Key,
                baseline: Key) -> tuple[float, int] | None:
    """`c`'s own variance of one block's paired difference and its degrees of freedom, pooled over every phase that
    measured it in several blocks, each phase's deviations from that phase's own mean: selection (the race's
    winner's curse) moves a phase's mean, not its spread, so the race's blocks may add to the spread of an estimate
    whose mean comes from its confirmation blocks alone. None where no phase has two blocks."""
    squares, df = 0.0, 0
    for phase in sorted({p for p, _ in ys.get(c, {}).values()}):
        ds = [d for d, _ in _pairs(ys, c, baseline, phase)[1]]
        if len(ds) > 1:
            squares, df = squares + _var(ds) * (len(ds) - 1), df + len(ds) - 1
    return (squares / df, df) if df else None


def default_techniques(baseline: Key) -> Callable[[Key], frozenset]:
    """A combination's techniques from its label ("a + b"); the baseline and non-text keys have none."""
    return lambda c: frozenset() if c == baseline or not isinstance(c, str) else frozenset(c.split(" + "))


def noise_sources(measurements: Iterable[Measurement[Key]], baseline: Key,
                  techniques: Callable[[Key], frozenset] | None = None) -> list[variance.Source]:
    """Every variance of one process's log throughput the measurements hold, none touched by drift between
    blocks: the baselines' spread within a block, and each combination's paired differences across the blocks
    of one phase (each pair with n baselines varies by sigma^2 (1 + 1/n))."""
    techniques = techniques or default_techniques(baseline)
    ys = _by_block(measurements)
    out = [variance.Source(frozenset(), _var(v), len(v) - 1)
           for _, v in ys.get(baseline, {}).values() if len(v) > 1]
    base = variance.pooled(out)
    for c in ys:
        if c == baseline:
            continue
        for phase in sorted({p for p, _ in ys[c].values()}):
            _, pairs = _pairs(ys, c, baseline, phase)
            if len(pairs) > 1:
                out.append(variance.Source(techniques(c), _own_process(pairs, base.low if base else None),
                                           len(pairs) - 1))
    return out


def _own_process(pairs: list[tuple[float, int]], base_var: float | None) -> float:
    """A combination's own process variance from its paired differences: var(d) = sigma_c^2 + sigma_base^2 / n,
    so the baselines' share is taken off where their variance is known (a noisy combination is not averaged
    with a quiet baseline); else sigma^2 (1 + 1/n) with one sigma for both. Never below half of var(d): the
    baselines' variance rests on a few within-block pairs, and where it came out high, taking it off left
    contenders a tenth of their true variance, so the race told true ties apart (docs/evidence.md, "Evidence: the
    race")."""
    if base_var is None:
        return _own_noise(pairs)
    raw = _var([d for d, _ in pairs])
    return max(raw - base_var * statistics.fmean(1 / n for _, n in pairs), 0.5 * raw)


def process_noise(measurements: Iterable[Measurement[Key]], baseline: Key) -> tuple[float | None, int, str]:
    """The pooled variance of one process's log throughput, its degrees of freedom, and where it came from
    ("paired": combinations measured in several blocks among the sources; "baseline": the baselines only)."""
    measurements = list(measurements)
    sources = noise_sources(measurements, baseline)
    pooled = variance.pooled(sources)
    if pooled is None:
        return None, 0, "none"
    from_baselines = sum(1 for _, v in _by_block(measurements).get(baseline, {}).values() if len(v) > 1)
    return pooled.low, pooled.df, "paired" if len(sources) > from_baselines else "baseline"


def estimates(measurements: Iterable[Measurement[Key]], baseline: Key,
              techniques: Callable[[Key], frozenset] | None = None) -> dict[Key, Estimate]:
    """The speed-up estimate of every combination measured in a block that also measured the baseline.

    Its variance comes from the variance model by technique (`ablate.stats.variance`; "model" when techniques got
    their own terms, else the pooled "paired" or "baseline" noise). A combination measured in several blocks
    combines the model's prediction for it (s0^2 on d0 degrees of freedom: the model's, less those of its own spread,
    which the model was fitted to too) with its own spread (s^2 on d: its
    paired differences about their phase's mean, pooled over its race and confirmation blocks, `_own_spread`) as
    a moderated variance (`variance.moderated`, after Smyth 2004): (d0 s0^2 + d s^2) / (d0 + d) on d0 + d
    degrees of freedom ("moderated"). Taking the wider of the two on its own few degrees of freedom would give a
    headline confirmed in three blocks t on 2 df (4.30). Its mean stays its confirmation blocks'.

    Noise differs between combinations beyond what the model by technique can say (bf16 autocast with a doubled
    batch can run at two levels 40% apart from one process to the next), so the prior is a robust one: its own
    spread alone where an F test at NOISIER_ALPHA says it is noisier than the model ("own"), and d0 at most
    PRIOR_DF. That keeps the headline's interval near its nominal coverage with two-level stacks, narrower than the
    wider of the two (tests/stats/test_moderated.py; figures in docs/measuring.md, "One estimator, and noise per
    combination"; docs/evidence.md, "Evidence: noise per combination").
    """
    measurements = list(measurements)
    techniques = techniques or default_techniques(baseline)
    ys = _by_block(measurements)
    var_, df, noise = process_noise(measurements, baseline)
    sources = noise_sources(measurements, baseline, techniques)
    model = variance.fit(sources)
    base_var = variance.pooled([s for s in sources if not s.techniques])
    if model is not None and model.by_technique:
        noise, df = "model", model.df
    out: dict[Key, Estimate] = {baseline: BASELINE_ESTIMATE} if baseline in ys else {}
    for c in ys:
        if c == baseline:
            continue
        phase, pairs = _pairs(ys, c, baseline)
        if not pairs:
            continue
        k = len(pairs)
        # var(d) in a block with n baselines: sigma_c^2 + sigma_base^2 / n (one sigma for both without techniques)
        sb = base_var.low if base_var and model and model.by_technique else None
        mine, its_df, its_noise = None, df, noise
        if model is not None:
            own_var, own_df = model.variance(techniques(c)), model.df_for(techniques(c))
            base_share = sum((sb if sb is not None else own_var) / n for _, n in pairs) / k
            mine = own_var + base_share
            if sb is not None:  # the two variances rest on different sources
                assert base_var is not None  # sb is its variance
                its_df = variance.satterthwaite([(own_var, own_df), (base_share, base_var.df)])
        spread = _own_spread(ys, c, baseline) if k > 1 else None
        if spread is not None:
            # The model was fitted to this spread too (`noise_sources`): the prior counts only the others' degrees of
            # freedom, so a combination raced alone is not counted twice.
            prior = (mine, its_df - spread[1]) if mine is not None else (0.0, 0)
            mine, its_df, alone = variance.moderated(prior, spread, NOISIER_ALPHA, PRIOR_DF)
            its_noise = "own" if alone else "moderated"
        se = math.sqrt(mine / k) if mine is not None else None
        out[c] = Estimate(statistics.fmean(d for d, _ in pairs), se, its_df, k, phase, its_noise)
    return out


def _block_means(measurements: Iterable[Measurement[Key]], baseline: Key) -> list[float]:
    """The baseline's mean log throughput in each block it ran in."""
    return [statistics.fmean(y) for _, y in _by_block(measurements).get(baseline, {}).values()]


def baseline_cv(measurements: Iterable[Measurement[Key]], baseline: Key) -> float | None:
    """The host's noise: the coefficient of variation of the baseline's throughput across blocks."""
    ys = _block_means(measurements, baseline)
    return statistics.stdev(ys) if len(ys) > 1 else None  # the SD of log throughput is the CV, to first order


def baseline_level(measurements: Iterable[Measurement[Key]], baseline: Key) -> Estimate | None:
    """The baseline's own level: its mean log throughput over its blocks' means, with the standard error of that mean
    across blocks (df: blocks - 1; None where it ran in one block). Not a speed-up: the absolute figure two studies
    compare (`ablate.stats.changes`), where a ratio of speed-ups hides a slower baseline. Across blocks rather than
    within, since a block's own conditions (drift, a neighbour's load) are what a second study does not share."""
    ys = _block_means(measurements, baseline)
    if not ys:
        return None
    n = len(ys)
    se = statistics.stdev(ys) / math.sqrt(n) if n > 1 else None
    return Estimate(statistics.fmean(ys), se, n - 1, n, FULL, "baseline")


def race_plan(members: Sequence[Key], baseline: Key, block: int, seed: int, phase: str = RACE) -> list[Slot[Key]]:
    """One race (or confirmation) block: the contenders and the baseline, in the block's own random order."""
    return _ordered(block, [baseline, *members], phase, seed)


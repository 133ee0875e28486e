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
  Noise differs between combinations, so one measured in several blocks
  takes the wider of its own spread and the pooled one ("own" when its own).

Pure functions over plain data: the runner feeds them stored measurements,
and the tests feed them simulated ones.
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence

from scipy import stats

from ablate.words import count

CONFIDENCE = 0.95
MIN_RACE_BLOCKS = 3  # a leader is declared only after this many race blocks (its interval comes from them)
MIN_POOLED_DF = 2  # fewer pooled degrees of freedom: fall back on the baseline's spread
SCREEN, RACE, FULL = "screen", "race", "full"

Key = Hashable  # a combination, as the caller names it


@dataclass(frozen=True)
class Settings:
    """The study file's `protocol:` section."""

    block_size: int = 8  # screening: combinations per block besides its baseline
    race_blocks: int = 6  # at most this many race blocks after screening; 0 = screening only
    contenders: int = 6  # at most this many combinations raced per block (leader included; the baseline extra)
    full_blocks: int | None = None  # N: every combination in each of N blocks (a full randomized block design)
    screen_baselines: int = 2  # baselines per screening block

    @property
    def racing(self) -> bool:
        return self.full_blocks is None and self.race_blocks > 0

    def describe(self) -> str:
        if self.full_blocks:
            return f"every combination in each of {count(self.full_blocks, 'block')}, in a random order per block"
        text = (f"screening in blocks of {count(self.block_size, 'combination')} plus "
                f"{count(self.screen_baselines, 'baseline measurement')}, in a random order per block")
        return text + (f"; then racing of up to {count(self.contenders, 'contender')} in at most "
                       f"{count(self.race_blocks, 'block')}"
                       if self.racing else "; no racing")


SINGLE_PASS = Settings(block_size=10**9, race_blocks=0, screen_baselines=1)  # the design before blocks


@dataclass(frozen=True)
class Slot:
    """One planned measurement: a combination in a block, at a position in its random order."""

    combination: Key
    block: int
    position: int
    phase: str


@dataclass(frozen=True)
class Measurement:
    combination: Key
    block: int
    phase: str
    log_throughput: float  # mean log throughput of the process's timed windows


def _ordered(block: int, members: Sequence[Key], phase: str, seed: int) -> list[Slot]:
    order = list(members)
    random.Random(f"{seed}:{block}").shuffle(order)  # str seeds hash deterministically across processes
    return [Slot(c, block, i, phase) for i, c in enumerate(order)]


def screening_plan(runnable: Sequence[Key], baseline: Key, settings: Settings, seed: int,
                   unrunnable: Sequence[Key] = ()) -> list[Slot]:
    """The screening blocks (or every full block). `unrunnable` combinations (skipped on this machine) take no
    time, so they join block 0 without counting towards its size."""
    others = [c for c in runnable if c != baseline]
    if settings.full_blocks:
        return [s for b in range(settings.full_blocks) for s in
                _ordered(b, [baseline, *others, *(unrunnable if b == 0 else ())], FULL, seed)]
    random.Random(f"{seed}:assign").shuffle(others)
    size = settings.block_size
    chunks = [others[i:i + size] for i in range(0, len(others), size)] or [[]]
    # Two baselines per screening block: a lucky or unlucky baseline process moves every screened
    # combination of its block, by half as much with two; and their difference measures a process's noise.
    return [s for b, chunk in enumerate(chunks) for s in
            _ordered(b, [*[baseline] * settings.screen_baselines, *chunk, *(unrunnable if b == 0 else ())], SCREEN, seed)]


@dataclass(frozen=True)
class Estimate:
    """A combination's speed-up over the baseline on the log scale, with what its interval rests on."""

    log: float
    se: float | None  # standard error of `log`; None when nothing estimates the noise
    df: int
    blocks: int  # blocks its estimate comes from
    phase: str  # SCREEN, RACE or FULL: which blocks
    noise: str  # "own" (its own blocks' spread), "paired" (pooled, raced combinations among the sources),
    # "baseline" (the baselines' spread within blocks only) or "none"

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        if self.se is None:
            return None
        if self.se == 0:
            return self.log, self.log
        half = stats.t.ppf(0.5 + confidence / 2, self.df) * self.se
        return self.log - half, self.log + half

    @property
    def factor(self) -> float:
        return math.exp(self.log)


BASELINE_ESTIMATE = Estimate(0.0, 0.0, 0, 0, SCREEN, "paired")  # x1.00 by definition


def _by_block(measurements: Iterable[Measurement]) -> dict[Key, dict[int, tuple[str, list[float]]]]:
    """combination -> block -> (phase, its log throughputs in that block)."""
    acc: dict[Key, dict[int, tuple[str, list[float]]]] = {}
    for m in measurements:
        acc.setdefault(m.combination, {}).setdefault(m.block, (m.phase, []))[1].append(m.log_throughput)
    return acc


def _pairs(ys: dict[Key, dict[int, tuple[str, list[float]]]], c: Key, baseline: Key) -> tuple[str, list[tuple[float, int]]]:
    """The phase an estimate of `c` uses, and per block its difference from the mean of the block's baselines
    with the number of those baselines."""
    base = ys.get(baseline, {})
    mine = {b: v for b, v in ys.get(c, {}).items() if b in base}
    raced = {b: v for b, v in mine.items() if v[0] == RACE}
    use = raced or mine
    phase = RACE if raced else next((p for p, _ in use.values()), SCREEN)
    return phase, [(statistics.fmean(y) - statistics.fmean(base[b][1]), len(base[b][1]))
                   for b, (_, y) in sorted(use.items())]


def process_noise(measurements: Iterable[Measurement], baseline: Key) -> tuple[float | None, int, str]:
    """The variance of one process's log throughput, its degrees of freedom, and where it came from.

    Two sources, pooled when both exist, neither touched by drift between blocks: the spread of a
    combination's paired differences across the blocks it ran in (each pair with one baseline varies by
    twice a process's variance), and the spread of the baselines measured twice in one block.
    """
    ys = _by_block(measurements)
    ss, df = 0.0, 0
    raced = False
    for c in ys:
        if c == baseline:
            continue
        _, pairs = _pairs(ys, c, baseline)
        if len(pairs) > 1:
            ds = [d for d, _ in pairs]
            scale = statistics.fmean(1 + 1 / n for _, n in pairs)  # var(d) = sigma^2 (1 + 1/baselines)
            ss += sum((d - statistics.fmean(ds)) ** 2 for d in ds) / scale
            df += len(ds) - 1
            raced = True
    for _, values in ys.get(baseline, {}).values():
        if len(values) > 1:
            ss += sum((v - statistics.fmean(values)) ** 2 for v in values)
            df += len(values) - 1
    if df == 0:
        return None, 0, "none"
    return ss / df, df, "paired" if raced else "baseline"


def _own_noise(pairs: list[tuple[float, int]]) -> float:
    """One combination's own process variance, from its paired differences across blocks (needs two)."""
    ds = [d for d, _ in pairs]
    scale = statistics.fmean(1 + 1 / n for _, n in pairs)  # var(d) = sigma^2 (1 + 1/baselines)
    return statistics.variance(ds) / scale


def estimates(measurements: Iterable[Measurement], baseline: Key) -> dict[Key, Estimate]:
    """The speed-up estimate of every combination measured in a block that also measured the baseline.

    Some combinations vary more from process to process than others (measured: bf16 autocast with a doubled
    batch moved between two levels 40% apart from one process to the next, where the baseline moved by 3%),
    so a combination measured in several blocks takes the wider of its own noise (degrees of freedom: its
    blocks minus one) and the pooled noise, never the narrower ("own" or "paired").
    """
    measurements = list(measurements)
    ys = _by_block(measurements)
    var, df, noise = process_noise(measurements, baseline)
    out: dict[Key, Estimate] = {baseline: BASELINE_ESTIMATE} if baseline in ys else {}
    for c in ys:
        if c == baseline:
            continue
        phase, pairs = _pairs(ys, c, baseline)
        if not pairs:
            continue
        k = len(pairs)
        mine, its_df, its_noise = var, df, noise
        if k > 1 and (var is None or (own := _own_noise(pairs)) > var):
            mine, its_df, its_noise = (own if var is not None else _own_noise(pairs)), k - 1, "own"
        se = math.sqrt(mine * sum(1 + 1 / n for _, n in pairs)) / k if mine is not None else None
        out[c] = Estimate(statistics.fmean(d for d, _ in pairs), se, its_df, k, phase, its_noise)
    return out


def baseline_cv(measurements: Iterable[Measurement], baseline: Key) -> float | None:
    """The host's noise: the coefficient of variation of the baseline's throughput across blocks."""
    ys = [statistics.fmean(y) for _, y in _by_block(measurements).get(baseline, {}).values()]
    return statistics.stdev(ys) if len(ys) > 1 else None  # the SD of log throughput is the CV, to first order


@dataclass(frozen=True)
class Race:
    """Where the race stands after the blocks measured so far."""

    leader: Key | None
    contenders: tuple[Key, ...]  # still in the running besides the leader
    race_blocks: int  # race blocks measured
    next_block: tuple[Key, ...] | None  # the combinations of the next race block (baseline added), None: stop
    why: str


def race(measurements: Sequence[Measurement], baseline: Key, eligible: set[Key], settings: Settings) -> Race:
    """The next race block, from every measurement so far and the combinations within the accuracy tolerance.

    Call it once every planned measurement has a result; it is deterministic, so workers that call it on the
    same measurements plan the same block.
    """
    est = {c: e for c, e in estimates(measurements, baseline).items() if c in eligible}
    raced_blocks = sorted({m.block for m in measurements if m.phase == RACE})
    n_race = len(raced_blocks)
    if not est:
        return Race(None, (), n_race, None, "no combination within the accuracy tolerance was measured")
    if n_race:  # contenders only drop out: the field is the last race block's
        last = raced_blocks[-1]
        field = {m.combination for m in measurements if m.block == last and m.combination in est}
    else:
        field = set(est)
    leader = max(sorted(field, key=str), key=lambda c: est[c].log)
    low = (est[leader].interval() or (-math.inf, math.inf))[0]
    still = [c for c in field if c != leader and ((est[c].interval() or (-math.inf, math.inf))[1] >= low)]
    still.sort(key=lambda c: (-est[c].log, str(c)))
    if not settings.racing:
        return Race(leader, tuple(still), n_race, None, "no racing in this protocol")
    if not still and n_race >= MIN_RACE_BLOCKS:
        return Race(leader, (), n_race, None, f"the leader is distinguishable from every other after {n_race} race blocks")
    if n_race >= settings.race_blocks:
        return Race(leader, tuple(still), n_race, None,
                    f"the race stopped at its maximum of {count(settings.race_blocks, 'block')}"
                    + (f" with {len(still)} still indistinguishable from the leader" if still else ""))
    members = [c for c in [leader, *still] if c != baseline][: max(1, settings.contenders)]
    if not members:
        return Race(leader, (), n_race, None, "no combination could still beat the baseline")
    return Race(leader, tuple(still), n_race, tuple(members), "racing")


def race_plan(members: Sequence[Key], baseline: Key, block: int, seed: int) -> list[Slot]:
    """One race block: the contenders and the baseline, in the block's own random order."""
    return _ordered(block, [baseline, *members], RACE, seed)

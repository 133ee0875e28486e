"""The study file's `protocol:` section: how many blocks, contenders and seeds (ablate.stats.protocol runs it).

Apart from ablate.stats.protocol so that a trial, which reads the study file, does not import the
protocol's statistics (scipy: about a second of every trial interpreter's start-up).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Mapping

from ablate.config.validate import StudyError
from ablate.words import count

# The protocol's phases, as every measurement stores its own: screening, the race (or every combination in `full`
# blocks), the leader's confirmation, a training for accuracy parity at one of the run's seeds, and the table's
# training of a group the answer did not need, once, after it. One home, read by the store, the statistics and the
# reports alike.
SCREEN, RACE, FULL, CONFIRM, PARITY, TABLE = "screen", "race", "full", "confirm", "parity", "table"
# The accuracy trainings: no speed-up or throughput comes from them. Only PARITY's decide the answer
# (ablate.stats.race.finalists); TABLE's fill the table and its verdicts.
TRAININGS = (PARITY, TABLE)
CONFIDENCE = 0.95  # every interval's two-sided level: speed-ups, accuracy changes, effects, costs
MAX_MARGIN = 0.5  # an equivalence margin of 50% or more says nothing: most likely a percentage written as 2, not 0.02
SINGLE_BLOCK = 10**9  # a block size no study reaches: every combination in one block
MIN_RACE_BLOCKS = 3  # a leader is declared only after this many race blocks (its interval comes from them)


@dataclass(frozen=True)
class ProtocolSettings:
    """The study file's `protocol:` section."""

    block_size: int = 8  # screening: combinations per block besides its baseline
    race_blocks: int = 6  # the race's planned blocks after screening; 0 = screening only
    # Where race_blocks leave members not told apart from the leader, the race goes on with the leader and its
    # closest contender for at most this many blocks more: a near tie at the top settled by measurements rather than
    # named by the luckier process (ablate.stats.race.racing). None after a race too short to decide (`extra_blocks`).
    extra_race_blocks: int = 6
    contenders: int = 6  # at most this many combinations raced per block (leader included; the baseline extra)
    full_blocks: int | None = None  # N: every combination in each of N blocks (a full randomized block design)
    screen_baselines: int = 2  # baselines per screening block
    confirm_blocks: int = 3  # after the race: blocks of the leader (and the simplest of its set) with the baseline
    seeds: int = 3  # at most this many training seeds per accuracy group (ablate.stats.parity: 2, then where uncertain)
    # A simpler member of the race's set is recommended instead of its leader only where an equivalence test shows
    # the leader at most this much faster (0.02: 2%); else the leader is (ablate.stats.answer.verdicts). None: the
    # smallest margin the design can show at the measured noise, at most 5% (ablate.stats.race.equivalence).
    equivalence_margin: float | None = None
    # A measurement during whose timed windows other work used more than this many cores on average (Linux:
    # ablate.trial.foreign_load) is measured again, after the machine quietens, at most `remeasure` times; null: never.
    # A tenth of a core: a measurement kept above it can read slow by several times the process noise
    # (docs/evidence.md, "Evidence: the load guard's limit").
    foreign_load_limit: float | None = 0.1
    remeasure: int = 2
    # Before each run's first measurement (a start, a resume, each worker), this many throughput-only trials of the
    # baseline, thrown away: a machine that was idle reads its first trial low (ablate.run.runner); 0: none.
    warm_up_trials: int = 1
    # Only what the answer needs: a fraction of the grid where one fits, accuracy only for the final set (--quick).
    quick: bool = False

    def __post_init__(self) -> None:
        margin = self.equivalence_margin
        if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float))
                                   or not 0 < margin < MAX_MARGIN):
            raise StudyError(f"protocol.equivalence_margin: how much faster the race's leader may be than a simpler "
                             f"stack recommended in its place, as a fraction (0.02 = 2%), above 0 and below "
                             f"{MAX_MARGIN:g}, or null for the smallest the design can show (at most 5%); got "
                             f"{margin!r}")

    @property
    def racing(self) -> bool:
        return self.full_blocks is None and self.race_blocks > 0

    @property
    def design(self) -> str:
        """Which design runs, as summary.json and the report name it."""
        if self.full_blocks:
            return "full blocks"
        if self.block_size >= SINGLE_BLOCK:
            return "single pass"
        if not self.racing:
            return "screening only"
        return "quick" if self.quick else "whole table"

    @property
    def extra_blocks(self) -> int:
        """The race blocks a race may take past `race_blocks`: none after a race too short to decide anything."""
        return self.extra_race_blocks if self.racing and self.race_blocks >= MIN_RACE_BLOCKS else 0

    @property
    def most_confirm_blocks(self) -> int:
        """The confirmation blocks a leader may take: `confirm_blocks`, as many again where they read it no faster
        than the baseline (`ablate.stats.race.racing`)."""
        return 2 * self.confirm_blocks

    def plain(self, screened: int, runnable: int, accuracy: str, picked: bool = False) -> str:
        """The plan as a practitioner says it, for the run's header: how much of the grid is measured, whether the
        fastest are raced, what trains for accuracy (`accuracy`: "finalists", "table" - the finalists, then every other
        group once -, "each group" or "none"). `screened`
        counts the baseline among the `runnable` combinations; `picked`: Optuna's TPE picks them. The method itself
        is `describe`."""
        if self.full_blocks:
            measure = f"measure all {runnable} in each of {count(self.full_blocks, 'block')}"
        elif self.block_size >= SINGLE_BLOCK:
            measure = f"measure all {runnable} once against one baseline (no interval)"
        elif screened < runnable:
            measure = f"measure {screened} of {runnable}, {'picked by TPE' if picked else 'predict the rest'}"
        else:
            measure = f"measure all {runnable}"
        said = [measure]
        if self.racing:
            said.append(f"race the fastest {min(self.contenders, max(runnable - 1, 1))}")
        said.append({"finalists": "then train the finalists' accuracy",
                     "table": "then train each group's accuracy, finalists first",
                     "each group": "then train each group's accuracy once"}.get(accuracy, "throughput only"))
        return ", ".join(said)

    def describe(self, screened: int | None = None, fraction: str | None = None) -> str:
        """The protocol in a sentence, true to the study when `screened` (the combinations screened besides the
        baseline) is given: 3 of them are "one block of 3 combinations", never "blocks of 8". `fraction`: where
        screening measures a fraction of the grid, what it is (`ablate.stats.screening.fraction.Fraction.describe`)."""
        if self.full_blocks:
            return f"every combination in each of {count(self.full_blocks, 'block')}, in a random order per block"
        size, contenders = self.block_size, self.contenders
        if screened is not None:
            contenders = min(contenders, max(screened, 1))
        if screened is not None and screened <= size:
            blocks = f"one block of {count(screened, 'combination')}"
        elif size >= SINGLE_BLOCK:  # the single pass: every combination at once
            blocks = "one block"
        elif screened is None:
            blocks = f"blocks of up to {count(size, 'combination')}"
        else:
            n = -(-screened // size)
            blocks = f"{n} blocks of {'' if screened % size == 0 else 'up to '}{count(size, 'combination')}"
        text = (f"screening{f' {fraction},' if fraction else ''} in {blocks} plus "
                f"{count(self.screen_baselines, 'baseline measurement')}, in a random order per block"
                + ("; where a model of its throughputs finds an aliased pair of interactions active, the "
                   "combinations it left out too (the fold-over)" if fraction else ""))
        more = (f" (where still undecided, up to {self.extra_blocks} more of the leader and its closest "
                f"contender)" if self.extra_blocks else "")
        if not self.racing:
            return text + "; no racing"
        # Race first, accuracy last (ablate.stats.race.finalists): throughput alone chooses who is trained for accuracy,
        # and the leader is confirmed once its accuracy allows it.
        return text + (f"; then racing of up to {count(contenders, 'contender')}"
                       + (" from the model's predictions, combinations never measured among them," if fraction else "")
                       + f" in at most "
                       f"{count(self.race_blocks, 'block')}{more}, eliminated by paired contrasts (studentized "
                       f"range, alpha spent over the looks); accuracy last: up to "
                       f"{count(self.seeds, 'training seed')} for the final set's groups and the baseline only, the "
                       f"race run again without a leader accuracy puts out; and "
                       f"{count(self.confirm_blocks, 'confirmation block')} of the leader it allows, as many "
                       f"again where they read it no faster than the baseline (then the baseline stands in if "
                       f"all still do)"
                       + ("" if self.quick else "; then every other accuracy group once, at the run's own seed"))


# The design before blocks.
SINGLE_PASS = ProtocolSettings(block_size=SINGLE_BLOCK, race_blocks=0, screen_baselines=1, confirm_blocks=0, seeds=1)


def single_pass(protocol: ProtocolSettings) -> ProtocolSettings:
    """`--single-pass`: the design before blocks, with the study's own load guard (it changes the blocks only)."""
    return replace(SINGLE_PASS, foreign_load_limit=protocol.foreign_load_limit, remeasure=protocol.remeasure,
                   warm_up_trials=protocol.warm_up_trials)


def chosen(protocol: ProtocolSettings, *, single: bool = False, quick: bool = False) -> ProtocolSettings | None:
    """The protocol `--single-pass` or `--quick` runs the study under; None: the study file's own."""
    if single:
        return single_pass(protocol)
    return replace(protocol, quick=True) if quick else None


# Defaults a release has changed: setting -> the values it took by default before. A study stored under one of them
# resumes under it (`resumed`), rather than refusing because this release's default differs.
# equivalence_margin: 0.02 before its default was derived from the design (`ablate.stats.race.equivalence`);
# quick: the answer only, before the whole table became the default.
FORMER_DEFAULTS: dict[str, tuple[object, ...]] = {"equivalence_margin": (0.02,), "quick": (True,)}
# Settings a store from before they existed followed at another value than today's default: a study stored before
# `quick` existed measured only what the answer needed.
ABSENT: dict[str, object] = {"quick": True}


def as_stored(stored: Mapping[str, object]) -> ProtocolSettings:
    """The protocol a store's settings name, a setting it lacks at the value it then followed (`ABSENT`)."""
    return ProtocolSettings(**{**ABSENT, **stored})  # type: ignore[arg-type]  # the store wrote its fields


def resumed(stored: dict[str, object], protocol: ProtocolSettings) -> tuple[ProtocolSettings | None, list[str]]:
    """The protocol a stored study resumes under, and the settings it keeps from its store: `protocol` with every
    setting the store holds at a former default (`FORMER_DEFAULTS`) where `protocol` has this release's default, so
    that an upgrade does not strand a half-measured study. None where another setting differs (a changed study)."""
    defaults, now = asdict(ProtocolSettings()), asdict(protocol)
    planned = {**defaults, **ABSENT, **stored}  # a study stored before a setting existed followed its default
    kept = [k for k, v in planned.items() if v != now.get(k) and now.get(k) == defaults.get(k)
            and v in FORMER_DEFAULTS.get(k, ())]
    protocol = replace(protocol, **{k: planned[k] for k in kept})
    return (protocol, kept) if asdict(protocol) == planned else (None, [])


def resume(stored_protocol: Mapping[str, object] | None, protocol: ProtocolSettings, stored_hash: str | None, *,
           file_hash: str, name: str, file: str, where: str) -> tuple[ProtocolSettings, str | None]:
    """Whether the stored study `name` goes on, and under which protocol: `protocol`, or the stored study's
    (`resumed`), with the line that says which settings it keeps (None: nothing to say). StudyError, naming its
    `file` and its store `where`, when the file changed since its measurements, or they follow another protocol."""
    if stored_hash and stored_hash != file_hash:
        raise StudyError(f"{file} changed since its stored results were measured (hash {stored_hash} -> {file_hash}); "
                         f"move {where} away or pass --storage to start afresh")
    if not stored_protocol:
        return protocol, None
    going_on, kept = resumed(dict(stored_protocol), protocol)
    if going_on is None:
        raise StudyError(f"the stored measurements of {name} follow another protocol ({stored_protocol}); "
                         "run with the same protocol, or pass --results or --storage to start afresh")
    said = ", ".join(f"{k}={getattr(going_on, k)!r}" for k in kept)
    return going_on, f"resuming under the stored study's {said}: the default it was measured with" if kept else None

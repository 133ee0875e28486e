"""The Optuna study's own record: what it stores beside its trials, read as a `StudyRecord` and written by `set_*`.

Its file hash, protocol settings, seeds, where the race ended, its MLflow runs, the bitwise checks and what it
cost against what was expected: what a resume, `ablate sync` and `ablate report` read back. The only module that
spells the Optuna study's user attrs, as `ablate.store.records` is for a trial's (and for the reason given there).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

import optuna

from ablate.config.design import ProtocolSettings, resume
from ablate.config.validate import StudyError
from ablate.store import seeds

if TYPE_CHECKING:
    from ablate.config.schema import Study

# The names are the stored format, kept as they were.
FILE_HASH_ATTR, PROTOCOL_ATTR, SEEDS_ATTR, RACE_ATTR = "file_hash", "protocol", "seeds", "race"
PARENT_ATTR = "mlflow_parent_run_id"  # the study's MLflow parent run
# Trials that finished without an MLflow run get one from `ablate sync`; a finished Optuna trial's
# user attrs can no longer be changed, so the new ids live in the Optuna study's user attrs.
RUNS_ATTR = "mlflow_runs"  # {str(trial number): run id}
BITWISE_ATTR = "bitwise"  # {device name: {accuracy group: [the group it trains as, why]}} (ablate.run.bitwise)
# What the study was expected to cost and what it cost (ablate.run.estimate): {"estimate": the counts said as it
# began, "minutes_estimate": the first estimate in minutes, "sessions": [{"began", "ended" (Unix seconds),
# "measurements", "accuracy_trainings"}, one per `ablate run` that measured]}. Added in format 1: older code
# ignores it, and a study stored before it has none.
COST_ATTR = "cost"
# A plan being queued (`ablate.store.plan`): its slots, written before the first is queued and cleared after the last;
# a stop in between leaves them for the resume. Added in format 1: older code ignores it.
PLAN_ATTR = "pending_plan"
# The study's end in MLflow (`ablate.tracking.parent_run`): "due" once every planned measurement has a result,
# "logged" once the parent run holds the end-of-study figures and is closed. A stop between the two leaves "due",
# and the next `ablate run` or `ablate sync` writes the end. Added in format 1: older code ignores it.
END_ATTR, END_DUE, END_LOGGED = "end", "due", "logged"
# The stored format's version, written when a study is created (`ablate.store.storage.create_study`). A store
# without it was written before it existed, in the format that became version 1 (a store from before ablate/ became
# packages resumes: tests/end_to_end/test_before_the_move.py). Raised only by a change older code cannot read; a store
# of a higher version than this code's is refused in one line rather than misread (docs/api.md, "The stored study").
FORMAT_ATTR, FORMAT_VERSION = "format_version", 1


@dataclass(frozen=True)
class StudyRecord:
    """What the Optuna study stores beside its trials: what a resume, `ablate sync` and `ablate report` read."""

    file_hash: str | None = None  # the study file's hash when its measurements were taken
    protocol: Mapping[str, Any] | None = None  # the protocol's settings (`ProtocolSettings` as a dict)
    seeds: Mapping[str, int] | None = None  # the run's protocol and training seeds (`ablate.store.seeds`)
    race: Mapping[str, Any] | None = None  # where the race stood when it ended: leader, why, blocks, pending
    parent_run_id: str | None = None  # the study's MLflow parent run
    runs: Mapping[int, str] = field(default_factory=dict)  # trial number -> the run `ablate sync` logged for it
    # device name -> accuracy group -> (the group it trains as, why): `ablate.run.bitwise`'s checks on that device
    bitwise: Mapping[str, Mapping[str, tuple[str, str]]] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION  # the stored format it was written in (FORMAT_ATTR)
    cost: Mapping[str, Any] = field(default_factory=dict)  # expected and actual (COST_ATTR); {} before it existed
    pending_plan: Sequence[Mapping[str, Any]] = ()  # slots of a plan a stop left part-queued (PLAN_ATTR)
    end: str | None = None  # END_DUE or END_LOGGED (END_ATTR); None while measurements are still planned

    @property
    def end_due(self) -> bool:
        """Every measurement has a result, and MLflow's parent run does not hold the end of the study yet."""
        return self.end == END_DUE

    @property
    def cost_summary(self) -> dict[str, Any] | None:
        """summary.json's `cost`: the estimates as stored, and the actual over every session - the wall time their
        union spans (workers sharing the study overlap), the measurements and accuracy trainings they ran; None
        for a study stored without it."""
        if not self.cost:
            return None
        sessions = sorted(self.cost.get("sessions", []), key=lambda s: s["began"])
        wall, reach = 0.0, -math.inf
        for s in sessions:  # the union of the sessions' spans
            wall += max(0.0, s["ended"] - max(s["began"], reach))
            reach = max(reach, s["ended"])
        return {"estimate": self.cost.get("estimate"), "minutes_estimate": self.cost.get("minutes_estimate"),
                "actual": {"wall_s": wall, "minutes": wall / 60, "sessions": len(sessions),
                           **{k: sum(s[k] for s in sessions) for k in ("measurements", "accuracy_trainings")}}}


def format_version(optuna_study: optuna.Study) -> int:
    """The stored format `optuna_study` was written in (1 where it does not say); StudyError where this code is
    older than the format."""
    version = int(optuna_study.user_attrs.get(FORMAT_ATTR, 1))
    if version > FORMAT_VERSION:
        raise StudyError(f"the stored study {optuna_study.study_name!r} is in format {version}, written by a newer "
                         f"ablate; this one reads formats up to {FORMAT_VERSION}: upgrade ablate, or give another "
                         "--results or --storage")
    return version


def set_format_version(optuna_study: optuna.Study) -> None:
    optuna_study.set_user_attr(FORMAT_ATTR, FORMAT_VERSION)


def from_study(optuna_study: optuna.Study) -> StudyRecord:
    a = optuna_study.user_attrs
    return StudyRecord(format_version=format_version(optuna_study), file_hash=a.get(FILE_HASH_ATTR),
                       protocol=a.get(PROTOCOL_ATTR), seeds=a.get(SEEDS_ATTR),
                       race=a.get(RACE_ATTR), parent_run_id=a.get(PARENT_ATTR),
                       runs={int(n): run_id for n, run_id in a.get(RUNS_ATTR, {}).items()},
                       bitwise={device: {group: (trains_as, why) for group, (trains_as, why) in checks.items()}
                                for device, checks in a.get(BITWISE_ATTR, {}).items()},
                       cost=a.get(COST_ATTR, {}), pending_plan=a.get(PLAN_ATTR, ()), end=a.get(END_ATTR))


def set_file_hash(optuna_study: optuna.Study, file_hash: str) -> None:
    optuna_study.set_user_attr(FILE_HASH_ATTR, file_hash)


def set_protocol(optuna_study: optuna.Study, protocol: ProtocolSettings) -> None:
    optuna_study.set_user_attr(PROTOCOL_ATTR, dataclasses.asdict(protocol))


def set_seeds(optuna_study: optuna.Study, seeds: Mapping[str, int]) -> None:
    optuna_study.set_user_attr(SEEDS_ATTR, dict(seeds))  # a resume reads them back


def run_settings(optuna_study: optuna.Study, study: Study, protocol: ProtocolSettings,
                 where: str) -> tuple[ProtocolSettings, dict[str, int], str | None]:
    """The protocol and seeds a run of `study` measures under, written to the record: a new study's own, or a stored
    one's where it may go on (`ablate.config.design.resume` decides, and raises where it may not; `where`: the
    study's store, for that error). With the line that says which settings it keeps (None: nothing to say)."""
    stored = from_study(optuna_study)
    protocol, said = resume(stored.protocol, protocol, stored.file_hash, file_hash=study.file_hash, name=study.name,
                            file=str(study.path), where=where)
    set_file_hash(optuna_study, study.file_hash)
    set_protocol(optuna_study, protocol)
    run_seeds = seeds.resolve(stored.seeds, study.budget.seed if study.seed_pinned else None)
    set_seeds(optuna_study, run_seeds)
    return protocol, run_seeds, said


class RaceStanding(Protocol):
    """What a resume reads back of the race (`ablate.stats.race.racing.Race` has these and more). Read-only: a frozen
    dataclass's fields."""

    @property
    def leader(self) -> str | None: ...
    @property
    def why(self) -> str: ...
    @property
    def race_blocks(self) -> int: ...
    @property
    def confirm_blocks(self) -> int: ...
    @property
    def pending(self) -> Sequence[str]: ...


def set_race(optuna_study: optuna.Study, race: RaceStanding) -> None:
    optuna_study.set_user_attr(RACE_ATTR, {"leader": race.leader, "why": race.why, "race_blocks": race.race_blocks,
                                           "confirm_blocks": race.confirm_blocks, "pending": list(race.pending)})


def set_pending_plan(optuna_study: optuna.Study, slots: Sequence[Mapping[str, Any]]) -> None:
    optuna_study.set_user_attr(PLAN_ATTR, [dict(s) for s in slots])


def set_end(optuna_study: optuna.Study, end: str | None) -> None:
    optuna_study.set_user_attr(END_ATTR, end)


def set_parent_run(optuna_study: optuna.Study, run_id: str) -> None:
    optuna_study.set_user_attr(PARENT_ATTR, run_id)


def set_runs(optuna_study: optuna.Study, runs: Mapping[int, str]) -> None:
    """The runs `ablate sync` logged, all of them (written after each, so an interrupted sync logs none twice)."""
    optuna_study.set_user_attr(RUNS_ATTR, {str(n): run_id for n, run_id in runs.items()})


def set_bitwise(optuna_study: optuna.Study, device_name: str, trains_as: Mapping[str, tuple[str, str]]) -> None:
    """`ablate.run.bitwise`'s answers on one device: accuracy group -> (the group it trains as, why)."""
    stored = dict(optuna_study.user_attrs.get(BITWISE_ATTR, {}))
    stored[device_name] = {group: list(answer) for group, answer in trains_as.items()}
    optuna_study.set_user_attr(BITWISE_ATTR, stored)


def set_cost(optuna_study: optuna.Study, estimate: Mapping[str, Any] | None = None,
             minutes_estimate: Mapping[str, Any] | None = None, session: Mapping[str, Any] | None = None) -> None:
    """Adds to the study's cost (COST_ATTR): its first estimate and first estimate in minutes (kept where one is
    stored: a resume re-estimates, but the one said at the start is what the actual is set against), a session."""
    cost = dict(optuna_study.user_attrs.get(COST_ATTR, {}))
    for key, value in (("estimate", estimate), ("minutes_estimate", minutes_estimate)):
        if value is not None and cost.get(key) is None:
            cost[key] = dict(value)
    if session is not None:
        cost["sessions"] = [*cost.get("sessions", []), dict(session)]
    optuna_study.set_user_attr(COST_ATTR, cost)

"""Every combination against its device's baseline, computed once: what the table, the CSV, the report, the plots,
summary.json and MLflow all render, so no two of them can disagree.

`compare` runs the speed-up estimator (`ablate.stats.protocol.estimates`) and the parity verdicts
(`ablate.stats.parity`) once per device, the race's recommendation on top of them (`ablate.stats.answer.verdicts`), and
what the load guard did (`MachineLoad`), under the limit of the protocol the run followed.

A row's throughput has one definition, consistent with its speed-up by construction: **the baseline's throughput
times the combination's speed-up**. A measurement's throughput is the geometric mean of its timed windows
(`ablate.trial.measure`); the baseline's is the geometric mean over its protocol measurements (`records.combine`), and a
combination's speed-up is the paired estimate over the blocks it shares with the baseline. So throughput / the
baseline's throughput = the speed-up, exactly, in every surface. A combination the estimator could not pair with
a baseline (none ran in its blocks) shows its own measurements' geometric mean and no speed-up.

Energy per sample, where the hardware counted it (`ablate.trial.energy`), is the same kind of paired ratio
against the baseline (`ablate.stats.speedups.energy_ratios`). Where a combination's step was profiled
(`ablate.trial.phases`), its row carries its profile (`ablate.stats.diagnosis.profile`): the mean over its complete
measurements, what the report's phase picture draws and `ablate.stats.answer.explained` reads.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

import optuna

from ablate.config.choices import BASELINE
from ablate.config.design import ProtocolSettings, as_stored
from ablate.config.study import Study
from ablate.stats import diagnosis
from ablate.stats import parity as parity_
from ablate.stats.answer import verdicts
from ablate.stats.protocol import CONFIDENCE, Estimate
from ablate.stats.race import finalists
from ablate.stats.screening import fractioned
from ablate.stats.speedups import Interval, Speedup, energy_ratios, protocol_measurements, speedups
from ablate.store.records import Record, baseline, by_device
from ablate.store.study_record import StudyRecord
from ablate.trial import foreign_load
from ablate.trial import metrics as metric


@dataclass(frozen=True)
class Comparison:
    """One combination against the baseline of its device."""

    record: Record
    speedup: Speedup | None  # the paired estimate, its interval, blocks and noise; None: no baseline shared a block
    throughput: float | None  # in the study's unit per second: the baseline's times the speed-up
    parity: parity_.Parity | None  # its accuracy group's verdict; None without a measured accuracy
    accuracy_change: float | None  # points: the parity verdict's mean paired change, else the plain difference
    energy: Estimate | None = None  # energy per sample over the baseline's, log scale; None: not paired
    profile: diagnosis.Profile | None = None  # where its step goes; None: no measurement of it was profiled
    unmeasured: str | None = None  # why it shows no accuracy where the study measures it (`finalists.unmeasured`)

    @property
    def combination(self) -> str:
        return self.record.combination

    @property
    def device(self) -> str:
        return self.record.device

    @property
    def is_baseline(self) -> bool:
        return self.record.combination == BASELINE

    @property
    def trains_as_baseline(self) -> bool:
        """Its accuracy is the baseline's training, not a measurement (`finalists.trains_as_baseline`)."""
        return finalists.trains_as_baseline(self.record)

    @property
    def point(self) -> float | None:
        return self.speedup.point if self.speedup else None

    @property
    def interval(self) -> Interval | None:
        """The speed-up's 95% interval (None: no noise estimate to build one from)."""
        return self.speedup.interval if self.speedup else None

    @property
    def blocks(self) -> int | None:
        return self.speedup.estimate.blocks if self.speedup and not self.is_baseline else None

    @property
    def noise(self) -> str | None:
        return self.speedup.estimate.noise if self.speedup else None

    @property
    def parity_failed(self) -> bool:
        """Its accuracy keeps it from the race and the recommendation: `below`, or `uncertain` and probably below."""
        return self.parity is not None and self.parity.ineligible

    @property
    def energy_ratio(self) -> float | None:
        """Its energy per sample over the baseline's (x0.80: a fifth less); None where they were not both counted."""
        return self.energy.point if self.energy else None

    @property
    def energy_interval(self) -> Interval | None:
        """The energy ratio's 95% interval (None: no noise estimate to build one from)."""
        bounds = self.energy.interval(CONFIDENCE) if self.energy else None
        return Interval(self.energy.log, *bounds).exp() if self.energy and bounds else None

    @property
    def peak_memory_mb(self) -> float | None:
        return self.record.metrics.get(metric.PEAK_MEMORY_MB)

    @property
    def trade_off(self) -> tuple[float, float]:
        """(throughput, accuracy): the Pareto front's and the plot's coordinates, for a row known to have both."""
        assert self.throughput is not None and self.record.accuracy is not None, self.combination
        return self.throughput, self.record.accuracy


@dataclass(frozen=True)
class MachineLoad:
    """What the load guard (`ablate.trial.foreign_load`) did over a device's measurements: those taken again
    because other work ran beside their timed windows, and those kept though still disturbed (the machine stayed busy),
    judged by the `foreign_load_limit` of the protocol the run followed."""

    limit: float | None  # foreign cores; None: the guard never measured again
    measurements: int  # those that read the machine's load; 0 where none could (not Linux)
    taken_again: int
    still_disturbed: int
    most_foreign_cores: float | None  # the busiest kept measurement's

    @property
    def figures(self) -> dict[str, float]:
        """summary.json's and MLflow's figures: empty where no measurement read the load (nothing read, nothing
        claimed)."""
        if not self.measurements:
            return {}
        assert self.most_foreign_cores is not None  # some measurement read it
        return {"measurements": float(self.measurements), "taken_again": float(self.taken_again),
                "still_disturbed": float(self.still_disturbed), "most_foreign_cores": self.most_foreign_cores}


def machine_load(records: list[Record], limit: float | None) -> MachineLoad:
    """The load guard over `records`' kept measurements, judged by `limit` (the protocol's `foreign_load_limit`)."""
    kept = [m.metrics for r in records for m in r.measurements if m.metrics.get(metric.FOREIGN_CORES) is not None]
    cores = [float(k[metric.FOREIGN_CORES]) for k in kept]
    return MachineLoad(limit, len(kept), int(sum(k.get(metric.REMEASURED, 0.0) for k in kept)),
                       sum(foreign_load.too_busy(c, limit) for c in cores), max(cores, default=None))


@dataclass(frozen=True)
class DeviceComparisons:
    """One device's comparisons, in the table's order (fastest first), and the recommendation drawn from them."""

    device: str
    records: list[Record]
    rows: tuple[Comparison, ...]
    recommendation: verdicts.Recommendation | None
    tolerance: float
    groups: dict[str, parity_.Parity]  # accuracy group -> its parity verdict
    load: MachineLoad  # what the load guard did, under the protocol the run followed
    screened: fractioned.Fractioned | None = None  # the fraction of the grid screening measured, where it measured one
    untrained: dict[str, str] = field(default_factory=dict)  # accuracy group -> why it has no verdict (`finalists`)
    quick: bool = False  # accuracy was trained only where it decides the answer (`protocol.quick`), not every group

    def __getitem__(self, combination: str) -> Comparison:
        return next(c for c in self.rows if c.combination == combination)

    def get(self, combination: str) -> Comparison | None:
        return next((c for c in self.rows if c.combination == combination), None)

    @property
    def fraction_first(self) -> fractioned.Fractioned | None:
        """`screened` where screening measured a fraction of the grid first (`--quick`); None where it measured the
        whole grid from the start, or nothing."""
        return self.screened if self.screened is not None and self.screened.part is not None else None

    @property
    def speedups(self) -> list[Speedup]:
        """Every estimated speed-up, fastest first."""
        return [c.speedup for c in self.rows if c.speedup]

    @property
    def speedup_of(self) -> dict[str, Speedup]:
        """combination -> its estimated speed-up."""
        return {c.combination: c.speedup for c in self.rows if c.speedup}

    @property
    def energy_counted(self) -> bool:
        """Whether any measurement on this device counted energy; where none did, nothing here can."""
        return any(metric.ENERGY_J_PER_SAMPLE in m.metrics for r in self.records for m in r.every_measurement)

    @property
    def baseline(self) -> Comparison | None:
        return next((c for c in self.rows if c.is_baseline and c.record.complete), None)

    @cached_property  # the report's text and its plot both ask; each answer builds a scratch Optuna study
    def front(self) -> list[Comparison]:
        """Combinations no other beats on both throughput and accuracy (Optuna's own Pareto front), fastest first."""
        done = [c for c in self.rows if c.record.complete and c.record.accuracy is not None and c.throughput]
        if not done:
            return []
        scratch = optuna.create_study(directions=["maximize", "maximize"])
        scratch.add_trials([optuna.trial.create_trial(values=list(c.trade_off)) for c in done])
        front = {t.number for t in scratch.best_trials}  # add_trials numbers them in order
        return sorted((done[n] for n in front), key=lambda c: -c.trade_off[0])

    @property
    def flagged(self) -> list[Record]:
        """Combinations whose accuracy is `below` the baseline's, or probably below: never raced or recommended."""
        return [c.record for c in self.rows if c.parity_failed]


def followed(study: Study, study_record: StudyRecord) -> ProtocolSettings:
    """The protocol the stored measurements followed (a run may override the study file's)."""
    return as_stored(study_record.protocol) if study_record.protocol else study.protocol


def compare_stored(study: Study, records: list[Record], study_record: StudyRecord) -> list[DeviceComparisons]:
    """A stored study's comparisons, under the protocol its measurements followed."""
    return compare(records, study.accuracy_tolerance, followed(study, study_record), study)


def compare(records: list[Record], tolerance: float, protocol: ProtocolSettings | None = None,
            study: Study | None = None) -> list[DeviceComparisons]:
    """Every combination of every device against that device's baseline (devices are never compared), under
    `protocol`: the protocol the run followed (the defaults where None). `study`: where given, a device whose
    screening measured a fraction of the grid races as the planner raced it (`ablate.stats.screening.fractioned`)."""
    return [_one_device(device, group, tolerance, protocol, study) for device, group in by_device(records).items()]


def _one_device(device: str, records: list[Record], tolerance: float, protocol: ProtocolSettings | None,
                study: Study | None = None) -> DeviceComparisons:
    protocol = protocol or ProtocolSettings()
    screened = fractioned.of(study, records) if study else None
    speedup_of = {s.record.combination: s for s in speedups(records)}
    shown = _shown(speedup_of, screened, records, protocol)
    energy_of = energy_ratios(records)
    groups = verdicts.parity_by_group(records, tolerance)
    verdict = verdicts.parity_of(records, tolerance, groups)
    base = baseline(records)
    base_rate = base.throughput if base else None
    base_acc = base.accuracy if base else None
    untrained = finalists.untrained(records, groups, protocol.quick)
    unmeasured = finalists.unmeasured(records, untrained)
    rows = []
    for r in records:
        s, p = shown.get(r.combination), verdict.get(r.combination)
        rate = base_rate * s.point if s and base_rate else r.throughput
        change = p.change if p else (r.accuracy - base_acc if r.accuracy is not None and base_acc is not None
                                     else None)
        rows.append(Comparison(r, s, rate, p, change, energy_of.get(r.combination),
                               diagnosis.profile(m.metrics for m in r.every_measurement if m.complete),
                               unmeasured.get(r.combination)))
    rows.sort(key=lambda c: (c.point is None, -(c.point or 0), -(c.throughput or 0)))
    rec = verdicts.recommendation(records, tolerance, protocol, speedup_of, verdict, screened)
    return DeviceComparisons(device, records, tuple(rows), rec, tolerance, groups,
                             machine_load(records, protocol.foreign_load_limit), screened, untrained, protocol.quick)


def _shown(speedup_of: dict[str, Speedup], screened: fractioned.Fractioned | None, records: list[Record],
           protocol: ProtocolSettings) -> dict[str, Speedup]:
    """The table's speed-ups: a row read once shows the screening model's estimate (`Fractioned.read_once` says
    why), in a study that races. The single pass keeps every reading as measured: it has no race to choose rows
    for, and its pick is already the model's (`ablate.stats.race.racing`). The answer keeps `speedup_of`: its
    leader was raced and confirmed, so it rests on more blocks than one."""
    if screened is None or not protocol.racing:
        return speedup_of
    modelled = screened.read_once({c: s.estimate for c, s in speedup_of.items()}, protocol_measurements(records))
    return {c: dataclasses.replace(s, estimate=modelled[c]) if c in modelled else s for c, s in speedup_of.items()}

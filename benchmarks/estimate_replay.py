"""The time-left estimate replayed on a study already run: as each protocol phase began, what the rest would take.

    python -m benchmarks.estimate_replay --from RESULTS_DIR [--study mnist_cnn] [--file STUDY.yaml] [--every N]

The progress line's estimate (`ablate.run.estimate.left`) is recomputed from the
study's own storage at the moment each phase's first measurement began (and at every
Nth measurement, with `--every N`): the measurements finished by then, and the
phase's run of measurements from there queued. It is priced twice: every measurement
at the mean duration of its kind (throughput-only or accuracy training), as the
estimate did before 2c8e235; and as the run now says it (each queued measurement and
each training to come at its combination's own price, `ablate.run.prices`; the
trainings to come named by `Planner.to_train`). Beside them: what the rest of the
study took; at the foot, at how many moments the run's range, as the progress line
rounds it, held that (`Moment.held`), and how wide it was (the median of its high
end over its low: a range that always holds can say little). The plan is priced
before the run's bitwise check, as the run prices it, and the groups then train as
that check found. The storage is read only. `--file`: the study file as it was
measured, where it has changed since (its plan is priced from it).
"""
from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ablate.config import study as studies
from ablate.config.design import as_stored
from ablate.run import estimate, prices
from ablate.stats.planner import Planner
from ablate.store import records, seeds, study_record
from ablate.store.records import Record
from ablate.words import minute_ends, span
from benchmarks.conclusion_cost import stored_study


@dataclass(frozen=True)
class Moment:
    """A moment: minutes (low, high) left by the kinds' means, as the run says it now, and what the rest took."""

    phase: str
    measured: int  # measurements begun before it
    at_min: float  # since the study's first measurement began
    by_means: tuple[float, float] | None
    now: tuple[float, float] | None
    took_min: float

    @property
    def shown(self) -> tuple[int, int] | None:
        """The run's range as the progress line rounds it (`ablate.words.minute_ends`: 0 for "under"); None: none
        said."""
        return None if self.now is None else minute_ends(*self.now)

    @property
    def held(self) -> bool | None:
        """Whether the run's range, as shown, held what the rest took; None: none said."""
        if (shown := self.shown) is None:
            return None
        low, high = shown
        return low - 0.5 <= self.took_min <= high + 0.5

    @property
    def width(self) -> float | None:
        """The run's range, as shown: its high end over its low; None: none said."""
        return None if (shown := self.shown) is None else shown[1] / max(1, shown[0])


def replay(plan: estimate.Plan, measured: Sequence[Record], planner: Planner | None = None,
           every: int = 0) -> list[Moment]:
    """At each phase's first measurement (in the order they began), and at every `every`-th measurement where given,
    the estimate of what is left of the study. `planner`: the study's, to know the groups the table pass will train
    (none: the plan has no table pass)."""
    ran = sorted(((r, d) for r in measured if (d := prices.done(r)) is not None), key=lambda pair: pair[1].began)
    done = [d for _, d in ran]
    first, end = min(d.began for d in done), max(d.ended for d in done)
    moments, seen = [], set()
    for i, (r, d) in enumerate(ran):
        if r.phase in seen and not (every and i % every == 0):
            continue
        seen.add(r.phase)
        batch = []  # the phase's run of measurements from here: queued together
        for later, _ in ran[i:]:
            if later.phase != r.phase:
                break
            batch.append(later)
        finished = [f for f in done if f.ended <= d.began]
        queued = [(b.combination, b.phase) for b in batch]
        anonymous = [("", phase) for _, phase in queued]  # no combination's own price: the kinds' means alone
        by_then = records.combine([m for m, f in ran if f.ended <= d.began])
        now = estimate.left(plan, finished, queued,
                            to_train=planner.to_train(by_then, [c for c, _ in queued]) if planner else None)
        moments.append(Moment(r.phase, i, (d.began - first) / 60, estimate.left(plan, finished, anonymous).minutes,
                              now.minutes, (end - d.began) / 60))
    return moments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.estimate_replay", description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, required=True, help="the run's results folder")
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--file", help="the study file as measured (default: --study's)")
    parser.add_argument("--device", default="cpu", help="the device type the study ran on")
    parser.add_argument("--every", type=int, default=0, help="a moment at every Nth measurement too")
    args = parser.parse_args(argv)
    optuna_study = stored_study(args.source, args.study)
    study = studies.load(args.file or args.study, args.device)
    record = study_record.from_study(optuna_study)
    protocol = as_stored(record.protocol or {})
    planner = Planner(study, protocol, (record.seeds or {}).get(seeds.PROTOCOL, 0), args.device, args.device,
                      defer_accuracy=protocol.racing and study.task.has_accuracy)
    measured = [records.from_trial(t) for t in optuna_study.get_trials(deepcopy=False)]
    print(f"{args.study}, {protocol.design}: minutes left as each phase began")
    print("| phase | measured | minute | by the kinds' means | as the run says it | the rest took |\n"
          "|---|---:|---:|---:|---:|---:|")
    expected = estimate.plan(planner, "grid")  # as the run said it: before its bitwise check (`Runner.run`)
    answers = record.bitwise.get(next(iter(record.bitwise), ""), {})  # then the groups train as it found
    planner.trains_as = {group: trains_as for group, (trains_as, _) in answers.items()}
    moments = replay(expected, measured, planner, args.every)
    for m in moments:
        print(f"| {m.phase} | {m.measured} | {m.at_min:.1f} | {_minutes(m.by_means)} | {_minutes(m.now)} "
              f"| {m.took_min:.1f} |")
    said = [m.held for m in moments if m.held is not None]
    widths = [w for m in moments if (w := m.width) is not None]
    print(f"the run's range held what the rest took at {sum(said)} of the {len(said)} moments it said minutes"
          + (f"; its high end over its low, median x{statistics.median(widths):.2f}" if widths else ""))
    return 0


def _minutes(found: tuple[float, float] | None) -> str:
    return "not yet" if found is None else span(round(found[0]), round(found[1]))


if __name__ == "__main__":
    raise SystemExit(main())

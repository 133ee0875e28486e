"""A measurement taken while other work used the machine is measured again, boundedly, and says so."""
from __future__ import annotations

from ablate.run.objective import measured_quietly
from ablate.trial import metrics as metric


def _attempts(*loads: float | None):
    """A measure(busy_limit) that returns these foreign loads in turn, and the busy limit each call was given."""
    calls: list[float | None] = []

    def measure(busy_limit: float | None) -> dict[str, float]:
        calls.append(busy_limit)
        got = {metric.THROUGHPUT: 100.0 + len(calls)}
        if (load := loads[len(calls) - 1]) is not None:
            got[metric.FOREIGN_CORES] = load
            if busy_limit is not None and load > busy_limit:
                got[metric.CUT_SHORT] = 1.0  # as StepClock.cut_short
        return got
    return measure, calls


def test_a_busy_measurement_is_taken_again_after_waiting_and_the_quiet_one_is_kept() -> None:
    measure, calls = _attempts(1.6, 0.05)
    waits: list[tuple[float, float]] = []
    shown: list[str] = []
    got = measured_quietly(measure, 0.25, 2, shown.append, wait=lambda limit, most: waits.append((limit, most)) or 0)
    assert len(calls) == 2 and got[metric.THROUGHPUT] == 102.0 and got[metric.REMEASURED] == 1.0
    assert len(waits) == 1 and waits[0][0] == 0.25
    assert shown and "1.60 cores" in shown[0] and "1 of 2" in shown[0]


def test_repeats_are_bounded_and_the_last_attempt_keeps_its_load() -> None:
    measure, calls = _attempts(1.0, 1.0, 0.9, 0.0)
    got = measured_quietly(measure, 0.25, 2, lambda text: None, wait=lambda limit, most: 0.0)
    assert len(calls) == 3 and got[metric.REMEASURED] == 2.0 and got[metric.FOREIGN_CORES] == 0.9
    # The attempts that would be discarded if busy stop at their windows; the last one, kept whatever its load, does
    # not: it is the measurement.
    assert calls == [0.25, 0.25, None] and metric.CUT_SHORT not in got


def test_quiet_unknown_or_unguarded_measurements_are_taken_once() -> None:
    for loads, limit in (((0.1,), 0.25), ((None,), 0.25), ((1.9,), None)):
        measure, calls = _attempts(*loads)
        got = measured_quietly(measure, limit, 2, lambda text: None, wait=lambda limit, most: 0.0)
        assert len(calls) == 1 and got[metric.REMEASURED] == 0.0
        assert calls == [limit]


def test_the_objective_guards_by_the_design_the_run_follows_not_the_study_files(monkeypatch) -> None:
    """The reports judge the load by the stored design; the measurements must have followed the same one."""
    from types import SimpleNamespace

    from ablate.config.design import ProtocolSettings
    from ablate.run import objective

    got: list[tuple[float | None, int]] = []
    monkeypatch.setattr(objective, "measured_quietly", lambda measure, limit, most, show: got.append((limit, most)))
    study = SimpleNamespace(protocol=ProtocolSettings(foreign_load_limit=0.5, remeasure=1))
    planner = SimpleNamespace(protocol=ProtocolSettings(foreign_load_limit=0.1, remeasure=3))
    run = SimpleNamespace(study=study, planner=planner, shared_cpu=False, interpreters=None, show=print)
    objective.Objective._measure(run, None, "here")  # type: ignore[arg-type]
    assert got == [(0.1, 3)]

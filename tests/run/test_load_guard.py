"""A measurement taken while other work used the machine is measured again, boundedly, and says so."""
from __future__ import annotations

from ablate.config.design import ProtocolSettings
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
    got = measured_quietly(measure, 0.25, 2, shown.append, wait=lambda limit, most: waits.append((limit, most)) or True)
    assert len(calls) == 2 and got[metric.THROUGHPUT] == 102.0 and got[metric.REMEASURED] == 1.0
    assert len(waits) == 1 and waits[0][0] == 0.25
    assert shown and "1.60 cores" in shown[0] and "1 of 2" in shown[0]


def test_the_default_limit_takes_a_fifth_of_a_core_again_and_keeps_a_quiet_machines_few_hundredths() -> None:
    """Load like a fifth of a core, mostly the hypervisor's steal, slowed a combination by several times the process
    noise, and the old limit of a quarter kept it; a quiet machine reads a few hundredths (docs/evidence.md,
    "Evidence: the load guard's limit")."""
    limit = ProtocolSettings().foreign_load_limit
    measure, calls = _attempts(0.21, 0.03)
    got = measured_quietly(measure, limit, 2, lambda text: None, wait=lambda limit, most: True)
    assert len(calls) == 2 and got[metric.REMEASURED] == 1.0 and got[metric.FOREIGN_CORES] == 0.03
    # Power: a measurement at a quiet machine's load is kept as it is.
    measure, calls = _attempts(0.045)
    got = measured_quietly(measure, limit, 2, lambda text: None, wait=lambda limit, most: True)
    assert len(calls) == 1 and got.get(metric.REMEASURED, 0.0) == 0.0


def test_repeats_are_bounded_and_the_last_attempt_keeps_its_load() -> None:
    measure, calls = _attempts(1.0, 1.0, 0.9, 0.0)
    got = measured_quietly(measure, 0.25, 2, lambda text: None, wait=lambda limit, most: True)
    assert len(calls) == 3 and got[metric.REMEASURED] == 2.0 and got[metric.FOREIGN_CORES] == 0.9
    # The attempts that would be discarded if busy stop at their windows; the last one, kept whatever its load, does
    # not: it is the measurement.
    assert calls == [0.25, 0.25, None] and metric.CUT_SHORT not in got


def test_a_machine_that_stayed_busy_through_the_wait_gets_one_last_attempt_not_another_wait() -> None:
    """A neighbour busy for the whole wait: the next attempt is kept whatever its load, so a constant neighbour costs
    one wait a measurement, not `most` of them."""
    measure, calls = _attempts(1.0, 1.0, 0.0)
    waits: list[float] = []
    shown: list[str] = []

    def never_quiet(limit: float, most: float) -> bool:
        waits.append(most)
        return False
    got = measured_quietly(measure, 0.25, 2, shown.append, wait=never_quiet)
    assert calls == [0.25, None] and len(waits) == 1
    assert got[metric.REMEASURED] == 1.0 and got[metric.FOREIGN_CORES] == 1.0 and metric.CUT_SHORT not in got
    assert "still busy" in shown[-1]
    # Power: a wait that does find quiet leaves the next attempt guarded, as before.
    measure, calls = _attempts(1.0, 1.0, 0.0)
    got = measured_quietly(measure, 0.25, 2, lambda text: None, wait=lambda limit, most: True)
    assert calls == [0.25, 0.25, None] and got[metric.FOREIGN_CORES] == 0.0


def test_quiet_unknown_or_unguarded_measurements_are_taken_once() -> None:
    for loads, limit in (((0.1,), 0.25), ((None,), 0.25), ((1.9,), None)):
        measure, calls = _attempts(*loads)
        got = measured_quietly(measure, limit, 2, lambda text: None, wait=lambda limit, most: True)
        assert len(calls) == 1 and got[metric.REMEASURED] == 0.0
        assert calls == [limit]


def test_the_objective_guards_by_the_design_the_run_follows_not_the_study_files(monkeypatch) -> None:
    """The reports judge the load by the stored design; the measurements must have followed the same one."""
    from types import SimpleNamespace

    from ablate.config.design import ProtocolSettings
    from ablate.run import objective

    got: list[tuple[float | None, int]] = []
    monkeypatch.setattr(objective, "measured_quietly",
                        lambda measure, limit, most, show, busy: got.append((limit, most)) or {})
    study = SimpleNamespace(protocol=ProtocolSettings(foreign_load_limit=0.5, remeasure=1))
    planner = SimpleNamespace(protocol=ProtocolSettings(foreign_load_limit=0.1, remeasure=3))
    run = SimpleNamespace(study=study, planner=planner, shared_cpu=False, interpreters=None, show=print, say=print,
                          machine_busy=False)
    objective.Objective._measure(run, None, "here")  # type: ignore[arg-type]
    assert got == [(0.1, 3)]


def test_after_a_measurement_kept_disturbed_the_next_looks_briefly_and_is_taken_once_if_still_busy() -> None:
    """A neighbour that stays costs the study one wait, not one a measurement: once a measurement was kept disturbed,
    the next probes for `BUSY_PROBE_S`, and measures once (kept, its load said) where it finds no quiet."""
    from ablate.run.objective import BUSY_PROBE_S

    probes: list[float] = []

    def never_quiet(limit: float, most: float) -> bool:
        probes.append(most)
        return False
    measure, calls = _attempts(1.0, 0.0)
    got = measured_quietly(measure, 0.25, 2, lambda text: None, wait=never_quiet, busy=True)
    assert probes == [BUSY_PROBE_S] and calls == [None]
    assert got[metric.REMEASURED] == 0.0 and got[metric.FOREIGN_CORES] == 1.0
    # Power: where the probe finds quiet, the measurement is guarded as any other.
    measure, calls = _attempts(1.0, 0.0)
    got = measured_quietly(measure, 0.25, 2, lambda text: None, wait=lambda limit, most: True, busy=True)
    assert calls == [0.25, 0.25] and got[metric.FOREIGN_CORES] == 0.0 and got[metric.REMEASURED] == 1.0


def test_the_objective_remembers_a_busy_machine_until_a_measurement_is_kept_quiet(monkeypatch) -> None:
    from types import SimpleNamespace

    from ablate.config.design import ProtocolSettings
    from ablate.run import objective

    loads = iter([1.0, 1.0, 1.0, 0.0])  # busy through the first measurement's wait and the second; then quiet
    told: list[bool] = []
    real = objective.measured_quietly
    monkeypatch.setattr(objective, "run_in_fresh_process", lambda spec, **kw: {metric.FOREIGN_CORES: next(loads)})
    monkeypatch.setattr(objective, "measured_quietly", lambda measure, limit, most, show, busy: told.append(busy)
                        or real(measure, limit, most, show, wait=lambda a, b: False, busy=busy))
    planner = SimpleNamespace(protocol=ProtocolSettings(foreign_load_limit=0.25, remeasure=2))
    said: list[str] = []
    run = SimpleNamespace(planner=planner, shared_cpu=False, interpreters=None, show=lambda text: None,
                          say=said.append, machine_busy=False)
    spec = objective.TrialSpec(None, (), "cpu", train_for_accuracy=False)  # type: ignore[arg-type] - the fake reads no study
    for _ in range(3):
        objective.Objective._measure(run, spec, "here")  # type: ignore[arg-type]
    # The first waited (and found none), the second was taken once, the third once and quiet: busy no more.
    assert told == [False, True, True] and run.machine_busy is False
    # Each retake and each measurement kept disturbed is a line of its own, not only the progress bar's end.
    assert said == ["here: other work used 1.00 cores during its windows: measuring again (1 of 2) once the machine "
                    "is quiet",
                    "here: still busy after 120 s: this attempt is the last, kept whatever its load",
                    *["here: the machine is still busy: measuring once, kept whatever its load"] * 2], said

"""The profiling window once per combination (ablate.run.objective.profiles): decided from the stored records, it opens
in each combination's first measurement only - the baseline's first in each screening block - and in no race,
confirmation or parity measurement; the surfaces that read phases still find every combination's profile."""
from __future__ import annotations

from collections import Counter

import optuna
from profiled import ORDER, measurement, study_file

from ablate.config.choices import BASELINE
from ablate.config.design import ProtocolSettings
from ablate.run.objective import profiles
from ablate.stats import diagnosis, protocol
from ablate.stats.answer import explained
from ablate.stats.answer.comparison import compare
from ablate.store import records
from ablate.store.records import PARITY, State, combine
from ablate.trial import metrics as metric

MACHINE = {"device": "cpu", "device_name": "a CPU", "torch": "2.11", "commit": "c", "host": "h"}
PROFILE = {metric.PROFILED_STEP_S: 0.01, metric.PROFILED_STEPS: 20.0}
OTHERS = [f"c{i}" for i in range(11)]  # with the baseline: two screening blocks of up to 8


def _study() -> optuna.Study:
    return optuna.create_study(directions=["maximize", "maximize"])


def _measure(study: optuna.Study, combination: str, block: int, phase: str, finish: bool = True,
             fails: bool = False) -> bool:
    """One measurement as the objective takes it: queued, started, asked whether it profiles, stored (a profile
    where it profiled); returns whether it profiled."""
    records.queue(study, {"c": combination}, block, 0, phase, combination, 1 if phase == PARITY else 0)
    trial = study.ask()
    records.start(trial, combination, MACHINE, "h:1")
    profiling = profiles(study, trial.number, combination, MACHINE["device_name"], records.from_trial(trial))
    records.set_measuring(trial, None, profiling)
    if not finish:
        return profiling
    if fails:
        records.mark(trial, State.FAILED, "diverged")
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return profiling
    records.result(trial, {metric.THROUGHPUT: 100.0, **(PROFILE if profiling else {})}, {})
    study.tell(trial, [100.0, 0.0])
    return profiling


def test_only_first_measurements_profile_through_screening_race_confirmation_and_parity():
    study, profiled = _study(), Counter[tuple[str, str]]()
    plan = protocol.screening_plan([BASELINE, *OTHERS], BASELINE, ProtocolSettings(), seed=3)
    later = [s for b in range(2, 8) for s in protocol.race_plan(OTHERS[:3], BASELINE, b, seed=3)]
    later += protocol.race_plan(OTHERS[:1], BASELINE, 8, seed=3, phase=protocol.CONFIRM)
    for slot in [*plan, *later]:
        if _measure(study, slot.combination, slot.block, slot.phase):
            profiled[slot.combination, slot.phase] += 1
    for combination in (BASELINE, OTHERS[0], OTHERS[4]):  # parity trainings at other seeds
        assert not _measure(study, combination, 0, PARITY)
    blocks = len({s.block for s in plan})
    assert blocks == 2
    # Each combination once, in screening; the baseline once in each screening block; nothing after.
    assert profiled == {**{(c, protocol.SCREEN): 1 for c in OTHERS}, (BASELINE, protocol.SCREEN): blocks}
    assert len(plan) - sum(profiled.values()) == blocks  # the second baseline of each block is not profiled


def test_a_running_first_measurement_holds_the_window_and_a_failed_one_hands_it_on():
    study = _study()
    assert _measure(study, "c0", 0, protocol.SCREEN, finish=False)  # still running in another worker
    assert not _measure(study, "c0", 1, protocol.RACE)
    study = _study()
    assert _measure(study, "c0", 0, protocol.SCREEN, fails=True)  # its profile never landed
    assert _measure(study, "c0", 1, protocol.RACE)  # so the next one profiles
    assert not _measure(study, "c0", 2, protocol.RACE)


def test_a_measurement_stored_before_the_request_was_recorded_counts_by_its_profile():
    study = _study()
    records.queue(study, {"c": "c0"}, 0, 0, protocol.SCREEN, "c0", 0)
    trial = study.ask()
    records.start(trial, "c0", MACHINE, "h:1")
    records.result(trial, {metric.THROUGHPUT: 100.0, **PROFILE}, {})  # no `profiling` attr: an older store
    study.tell(trial, [100.0, 0.0])
    assert not _measure(study, "c0", 1, protocol.RACE)
    other_device = {**MACHINE, "device_name": "another"}
    records.queue(study, {"c": "c0"}, 1, 0, protocol.RACE, "c0", 0)
    trial = study.ask()
    records.start(trial, "c0", other_device, "h:2")
    assert profiles(study, trial.number, "c0", "another", records.from_trial(trial))  # each device its own


def test_the_phases_surfaces_read_the_first_profiles(tmp_path):
    # tests/support/profiled.py's study, profiled as the objective now asks: every combination in its first
    # block only, the baseline in every block. Its explanations are those of the study profiled throughout (its
    # combinations' steps are alike in every block): the runner's baseline profile, the ceilings, the sentences,
    # the verdicts and the picture's bars.
    study = study_file(tmp_path)

    def said(first_only: bool) -> tuple:
        stored = combine([measurement(4 * b + i, c, b, profiled=not first_only or b == 0 or c == BASELINE)
                          for b in range(4) for i, c in enumerate(ORDER)])
        (compared,) = compare(stored, 0.5)
        found = explained.explain(study, compared)
        base = diagnosis.profile(m.metrics for r in stored if r.combination == BASELINE for m in r.measurements)
        assert base is not None
        return ([(c.technique, c.sentence, c.verdict) for c in found.checks], found.recommended,
                [c.combination for c in found.profiled], base.share("data"))

    assert said(first_only=True) == said(first_only=False)

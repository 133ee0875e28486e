"""A plan is stored whole: a stop while its slots are being queued leaves none of them unplanned for good
(ablate.store.plan). The run that reproduced the loss: a kill as the first of a study's screening slots was queued;
the resume measured that one slot and ended with exit status 0."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ablate.store import plan, records, study_record

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _slots(n: int) -> list[plan.Queued]:
    return [plan.Queued({"amp": "off" if i % 2 else "bf16"}, block=i // 2, position=i % 2, phase="screen",
                        combination="baseline" if i % 2 else "amp(bf16)") for i in range(n)]


def _stop_after(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """records.queue as a kill leaves it: the first `n` slots queued, then the process gone."""
    queue, calls = records.queue, [0]

    def queue_then_stop(*args, **kwargs) -> None:
        if calls[0] == n:
            raise KeyboardInterrupt
        calls[0] += 1
        queue(*args, **kwargs)

    monkeypatch.setattr(records, "queue", queue_then_stop)


def _waiting(study: optuna.Study) -> list[tuple]:
    return sorted((t.user_attrs["block"], t.user_attrs["position"])
                  for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


@pytest.mark.parametrize("stopped_after", [0, 1, 5])
def test_a_plan_stopped_part_way_is_completed_once_and_only_once(monkeypatch, stopped_after):
    study = optuna.create_study(directions=["maximize", "maximize"])
    with monkeypatch.context() as patch:
        _stop_after(patch, stopped_after)
        with pytest.raises(KeyboardInterrupt):
            plan.queue(study, _slots(8))
    assert len(_waiting(study)) == stopped_after
    assert plan.complete(study) == 8 - stopped_after
    assert _waiting(study) == sorted((i // 2, i % 2) for i in range(8))
    assert study_record.from_study(study).pending_plan == []
    assert plan.complete(study) == 0 and len(_waiting(study)) == 8  # a second resume adds nothing


def test_a_plan_queued_whole_leaves_nothing_pending():
    study = optuna.create_study(directions=["maximize", "maximize"])
    plan.queue(study, _slots(4))
    assert len(_waiting(study)) == 4 and plan.complete(study) == 0


def test_a_slot_already_measured_is_not_queued_again():
    # The stop came after the slot was queued, and the slot then ran before the resume completed the plan.
    study = optuna.create_study(directions=["maximize", "maximize"])
    slots = _slots(4)
    study_record.set_pending_plan(study, [q.stored() for q in slots])
    records.queue(study, slots[0].levels, slots[0].block, slots[0].position, "screen", slots[0].combination, 0)
    trial = study.ask()
    study.tell(trial, [1.0, 1.0])
    assert plan.complete(study) == 3
    assert len(study.get_trials(deepcopy=False)) == 4


def test_a_run_stopped_while_queueing_its_screening_resumes_with_every_slot(tmp_path, monkeypatch):
    """The runner's own resume: the screening a kill cut after its first slot is planned whole by the next run."""
    from ablate.config import study as studies
    from ablate.run.runner import Runner
    from ablate.store.storage import default_storage
    from ablate.trial.machine import describe

    study, machine = studies.load(str(TINY), "cpu"), describe("cpu")
    storage = default_storage(study, tmp_path)
    whole = Runner(study, machine, "grid", default_storage(study, tmp_path / "whole"), tmp_path / "whole")
    assert whole._next_step() == "run"
    planned = _waiting(whole.optuna_study)
    assert len(planned) > 1

    with monkeypatch.context() as patch:
        _stop_after(patch, 1)
        with pytest.raises(KeyboardInterrupt):
            Runner(study, machine, "grid", storage, tmp_path)._next_step()
    resumed = Runner(study, machine, "grid", storage, tmp_path)
    assert len(_waiting(resumed.optuna_study)) == 1
    assert resumed._next_step() == "run"
    assert _waiting(resumed.optuna_study) == planned

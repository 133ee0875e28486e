"""Re-queuing an interrupted grid trial keeps its grid point, so the grid still finishes exactly once."""
from __future__ import annotations

import optuna
from optuna.trial import TrialState

from ablate.store import records
from ablate.store.storage import requeue

SPACE = {"x": ["a", "b", "c"]}


def _objective(trial: optuna.Trial) -> float:
    trial.suggest_categorical("x", SPACE["x"])
    return 1.0


def test_an_interrupted_trial_requeued_when_one_grid_point_is_left_runs_and_the_grid_finishes():
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=optuna.samplers.GridSampler(SPACE, seed=0))
    study.optimize(_objective, n_trials=1)
    interrupted = study.ask()  # the grid gives it the second point; a kill leaves it unfinished
    interrupted.suggest_categorical("x", SPACE["x"])
    study.tell(interrupted, state=TrialState.FAIL)
    requeue(study, study.trials[interrupted.number])
    # One grid point is left when the re-queued trial ends: Optuna's GridSampler must find its grid id.
    study.optimize(_objective, n_trials=2)
    done = [t.params["x"] for t in study.trials if t.state == TrialState.COMPLETE]
    assert sorted(done) == ["a", "b", "c"]


def test_a_requeued_measurement_keeps_its_parity_seed_and_that_tpe_picked_it():
    # Without them a stopped parity run would train again at the run's own seed, and a stopped TPE pick
    # would not count as picked, so TPE would pick one combination too many.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study()
    records.queue(study, {"x": "b"}, block=-2, position=0, phase="parity", combination="b", seed_index=2)
    parity = study.ask()
    picked = study.ask()
    records.place(picked, 0, 1, "screen")
    for trial in (parity, picked):
        study.tell(trial, state=TrialState.FAIL)
        requeue(study, study.trials[trial.number])
    again = [records.from_trial(t) for t in study.trials if t.state == TrialState.WAITING]
    assert [(r.slot, r.phase, r.seed_index, r.picked) for r in again] == [((-2, 0), "parity", 2, False),
                                                                         ((0, 1), "screen", 0, True)]

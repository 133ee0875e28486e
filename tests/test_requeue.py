"""Re-queuing an interrupted grid trial keeps its grid point, so the grid still finishes exactly once."""
from __future__ import annotations

import optuna
from optuna.trial import TrialState

from ablate.storage import requeue

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

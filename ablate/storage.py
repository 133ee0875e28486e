"""Where a study's trials live: the Optuna storage (SQLite for one process, a server database for many)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from ablate import claim
from ablate.study import Study

CONNECT_ATTEMPTS = 5
# The user attrs a queued trial carries into its run: where it sits in the protocol.
SLOT_ATTRS = ("block", "position", "phase", "combination")


def default_storage(study: Study, results_dir: Path) -> str:
    return f"sqlite:///{(results_dir / study.name / 'optuna.db').resolve()}"


def sqlite_path(storage: str) -> Path | None:
    """The database file of an SQLite storage URL; None for any other storage."""
    return Path(storage.removeprefix("sqlite:///")) if storage.startswith("sqlite:///") else None


def requeue(study: optuna.Study, trial: FrozenTrial) -> None:
    """Queue `trial`'s measurement to run again: its combination, in its block and place, keeping its grid point.

    Like `Study.enqueue_trial` with user attrs, plus the trial's `grid_id`:
    GridSampler reads the grid id of every finished trial when one grid point
    is left, and raises KeyError for a queued trial that has none.
    """
    grid = {k: trial.system_attrs[k] for k in ("grid_id", "search_space") if k in trial.system_attrs}
    slot = {k: trial.user_attrs[k] for k in SLOT_ATTRS if k in trial.user_attrs}
    study.add_trial(optuna.trial.create_trial(state=TrialState.WAITING, user_attrs=slot,
                                              system_attrs={"fixed_params": dict(claim.params(trial)), **grid}))


def enqueue(study: optuna.Study, params: dict[str, str], slot: dict[str, Any]) -> None:
    """Queue one planned measurement; Optuna's storage hands each queued trial to exactly one worker."""
    study.enqueue_trial(params, user_attrs=slot)


def shared(storage: str) -> bool:
    """A server database (PostgreSQL, MySQL) that several workers share; SQLite is one process's."""
    return not storage.startswith("sqlite:")


def create_study(storage: str, heartbeat: dict[str, Any] | None, **kwargs: Any) -> tuple[optuna.Study, bool]:
    """The study, and whether this call created it: the database lets exactly one of several workers started
    together create it (the others get DuplicatedStudyError and load it). Retried, because they also race to
    create Optuna's tables, and the losers of that get an integrity error from the database."""
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            backend = RDBStorage(storage, **heartbeat) if heartbeat is not None else storage
            try:
                return optuna.create_study(storage=backend, **kwargs), True
            except optuna.exceptions.DuplicatedStudyError:
                return optuna.load_study(storage=backend, study_name=kwargs["study_name"],
                                         sampler=kwargs["sampler"]), False
        except sqlalchemy.exc.SQLAlchemyError:
            if attempt == CONNECT_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def optuna_study_name(study: Study, search: str, device_type: str) -> str:
    return f"{study.name}:{search}:{device_type}"

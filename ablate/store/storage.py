"""Where a study's trials live: the Optuna storage (SQLite for one process, a server database for many)."""
from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
import sqlalchemy.exc
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial

from ablate.config.study import Study, StudyError
from ablate.store import claim, records, study_record

CONNECT_ATTEMPTS = 5
# The objectives' names, in the order of the study's directions: optuna-dashboard labels its axes with them.
METRIC_NAMES = ["throughput (samples/s)", "test accuracy (%)"]


def metric_names(unit: str = "samples") -> list[str]:
    """The objectives' names for a study whose throughput counts `unit` (samples, or tokens for a language model)."""
    return [f"throughput ({unit}/s)", *METRIC_NAMES[1:]]


def default_storage(study: Study, results_dir: Path) -> str:
    return f"sqlite:///{(results_dir / study.name / 'optuna.db').resolve()}"


def sqlite_path(storage: str) -> Path | None:
    """The database file of an SQLite storage URL; None for any other storage."""
    return Path(storage.removeprefix("sqlite:///")) if storage.startswith("sqlite:///") else None


def requeue(optuna_study: optuna.Study, trial: FrozenTrial) -> None:
    """Queue `trial`'s measurement to run again: its combination, in its block and place, keeping its grid point.

    Like `Study.enqueue_trial` with its slot (`records.queue`), plus the
    trial's `grid_id`: GridSampler reads the grid id of every finished trial
    when one grid point is left, and raises KeyError for a queued trial that has none.
    """
    grid: dict[str, Any] = {k: trial.system_attrs[k] for k in ("grid_id", "search_space") if k in trial.system_attrs}
    optuna_study.add_trial(records.waiting_copy(trial, {"fixed_params": dict(claim.params(trial)), **grid}))


def check(storage: str) -> None:
    """One line, before anything is written, for a storage that is not a database URL, names a database
    SQLAlchemy does not know, lacks its driver, or (a server database) does not answer."""
    try:
        url = sqlalchemy.engine.make_url(storage)
        url.get_dialect()
    except sqlalchemy.exc.NoSuchModuleError:  # an ArgumentError too: first
        raise StudyError(f"--storage {storage!r}: unknown database {url.drivername!r}; "
                         "choose one of: sqlite, postgresql, mysql") from None
    except sqlalchemy.exc.ArgumentError:
        raise StudyError(f"--storage {storage!r} is not a database URL; give sqlite:///PATH or "
                         "postgresql://user:password@host/db") from None
    except ImportError as error:
        raise StudyError(f"--storage {storage!r} needs a driver that is not installed: {error}") from None
    if not shared(storage):
        return
    engine = None
    try:
        engine = sqlalchemy.create_engine(url)
        engine.connect().close()
    except ImportError as error:
        raise StudyError(f"--storage {url.render_as_string()} needs a driver that is not installed: {error}") from None
    except sqlalchemy.exc.SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise StudyError(f"--storage {url.render_as_string()} cannot be opened ({reason}); start or create the "
                         "database, or give another --storage") from None
    finally:
        if engine is not None:
            engine.dispose()


def shared(storage: str) -> bool:
    """A server database (PostgreSQL, MySQL) that several workers share; SQLite is one process's."""
    return not storage.startswith("sqlite:")


class _ServerStorage(RDBStorage):
    """Optuna's storage on a server database, whose heartbeat misses a beat while the server restarts instead of
    ending its thread with a traceback: the next beat, ten seconds on, tries again."""

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            super().record_heartbeat(trial_id)
        except (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError):
            pass


def create_study(storage: str, heartbeat: dict[str, Any] | None, names: list[str] = METRIC_NAMES,
                 **kwargs: Any) -> tuple[optuna.Study, bool]:
    """The study, and whether this call created it: the database lets exactly one of several workers started
    together create it (the others get DuplicatedStudyError and load it). Retried, because they also race to
    create Optuna's tables, and the losers of that get an integrity error from the database."""
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            # pool_pre_ping: a connection a server restart broke is replaced when next taken from the pool,
            # not handed to a query that fails (`ablate.run.outages` waits out the restart itself).
            backend = (_ServerStorage(storage, engine_kwargs={"pool_pre_ping": True}, **heartbeat)
                       if heartbeat is not None else storage)
            try:
                created = optuna.create_study(storage=backend, **kwargs)
                study_record.set_format_version(created)
                return _named(created, names), True
            except optuna.exceptions.DuplicatedStudyError:
                loaded = optuna.load_study(storage=backend, study_name=kwargs["study_name"], sampler=kwargs["sampler"])
                study_record.format_version(loaded)  # refused here, before a newer format is misread
                return _named(loaded, names), False
        except sqlalchemy.exc.SQLAlchemyError:
            if attempt == CONNECT_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def _named(optuna_study: optuna.Study, names: list[str]) -> optuna.Study:
    """`optuna_study` with its objectives named (also one stored before ablate named them)."""
    if optuna_study.metric_names is None:
        with warnings.catch_warnings():  # "experimental" since Optuna 3.2: a note for Optuna's users, not ablate's
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna_study.set_metric_names(names)
    return optuna_study


def optuna_study_name(study: Study, search: str, device_type: str) -> str:
    return f"{study.name}:{search}:{device_type}"

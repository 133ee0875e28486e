"""Outages a run rides through: MLflow going away costs telemetry, never a measurement; a server database that
restarts costs a wait, never the study.

MLflow is a copy of the results (the Optuna storage keeps them): while it is down the tracker is offline, and
between measurements - never during one, whose process is timed and would have the requests beside it - the
run asks whether it answers again and logs what it missed (`catch_up`). A server database (PostgreSQL) that stops
answering is waited for, up to `DATABASE_WAIT_S`, then the run goes on; SQLAlchemy's `pool_pre_ping`
(`ablate.store.storage.create_study`) replaces the connections the restart broke. A trial cut off by the outage
is found stale by Optuna's heartbeat and measured again, as a dead worker's is.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import optuna
import sqlalchemy.exc
from sqlalchemy.engine import make_url

from ablate.config.study import Study
from ablate.config.validate import StudyError
from ablate.run import full_disk
from ablate.run.stored_study import comparisons
from ablate.store import records
from ablate.tracking.parent_run import ParentRun
from ablate.tracking.sync import push_missing
from ablate.tracking.tracker import Tracker

DATABASE_WAIT_S = float(os.environ.get("ABLATE_DATABASE_WAIT_S", "300"))  # a restart, a failover: minutes at most
DATABASE_POLL_S = 2.0


class DatabaseLost(StudyError):
    """The server database stayed unreachable for `DATABASE_WAIT_S`: one line, and a resume once it is back."""


def _connection_error(error: BaseException) -> sqlalchemy.exc.DBAPIError | None:
    for e in full_disk.chain(error):
        if isinstance(e, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)) or (
                isinstance(e, sqlalchemy.exc.DBAPIError) and e.connection_invalidated):
            return e
    return None


def database_lost(error: BaseException) -> bool:
    """Whether `error`, or one it was raised from, is the database connection failing (the server stopped,
    restarted or is out of reach), not a query the database refused."""
    return _connection_error(error) is not None


def shown(storage: str) -> str:
    """The storage URL without its password."""
    return make_url(storage).render_as_string(hide_password=True)


def wait_for_database(optuna_study: optuna.Study, storage: str, error: BaseException, say: Callable[[str], None],
                      wait_s: float = DATABASE_WAIT_S) -> None:
    """Until the study's database answers again; `DatabaseLost` after `wait_s`."""
    lost = _connection_error(error) or error  # the driver's words, not those of the layers that wrapped them
    reason = " ".join(str(getattr(lost, "orig", None) or lost).split())[:160]
    say(f"the study's database at {shown(storage)} stopped answering ({reason}); waiting up to {wait_s:.0f} s for "
        "it to come back")
    began = time.monotonic()
    while time.monotonic() - began < wait_s:
        time.sleep(DATABASE_POLL_S)
        try:
            optuna_study._storage.get_study_id_from_name(optuna_study.study_name)
        except Exception:  # still down
            continue
        say(f"the study's database answers again after {time.monotonic() - began:.0f} s: the study goes on")
        return
    raise DatabaseLost(f"the study's database at {shown(storage)} stopped answering ({reason}) and did not come back "
                       f"within {wait_s:.0f} s; the measurements stored before are kept: start the database and run "
                       "the same command again to resume")


def catch_up(study: Study, optuna_study: optuna.Study, search: str, tracker: Tracker, parent: ParentRun,
             now: bool = False) -> int | None:
    """MLflow answering again after an outage: the runs it missed, logged (`push_missing`); how many, or None
    where it was not asked or still does not answer. Asked at most every `RECONNECT_S` unless `now`."""
    if not tracker.reconnect(now):
        return None
    parent.open()  # a run that began offline has none yet
    try:
        return push_missing(study, optuna_study, search, tracker, [],
                            lambda: comparisons(study, optuna_study, records.load(optuna_study)))
    except StudyError:  # down again mid-way: what was logged is recorded, the rest waits for the next time
        return None

"""Outages a run rides through (ablate.run.outages): a server database that stops answering is told from a query it
refused, waited for, and given up on in one line; MLflow answering again is asked at most every RECONNECT_S."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy.exc
from messages import one_message
from optuna.exceptions import StorageInternalError

from ablate.config.study import load
from ablate.render.terminal import message
from ablate.run import outages
from ablate.tracking import tracker as tracking
from ablate.tracking.tracker import Tracker
from ablate.trial.machine import describe

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except Exception as error:
            raise StorageInternalError("An exception is raised during the commit") from error
    except StorageInternalError as wrapped:
        return wrapped


def _operational(text: str) -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception(text))


def test_a_lost_connection_is_told_from_a_refused_query():
    assert outages.database_lost(_raised_from(_operational("server closed the connection unexpectedly")))
    assert outages.database_lost(_operational("connection refused"))
    assert not outages.database_lost(_raised_from(sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("dup"))))
    assert not outages.database_lost(ValueError("no database here"))


class _Storage:
    def __init__(self, failures: int) -> None:
        self.failures = failures

    def get_study_id_from_name(self, name: str) -> int:
        if self.failures:
            self.failures -= 1
            raise _operational("connection refused")
        return 1


def _study(failures: int) -> SimpleNamespace:
    return SimpleNamespace(_storage=_Storage(failures), study_name="tiny:grid:cpu")


def test_the_run_waits_for_its_database_and_goes_on_when_it_answers(monkeypatch):
    monkeypatch.setattr(outages, "DATABASE_POLL_S", 0.0)
    said: list[str] = []
    outages.wait_for_database(_study(3), "postgresql://ablate:secret@db/ablate", _operational("restarting"),
                              said.append, wait_s=60)
    assert len(said) == 2 and "stopped answering" in said[0] and "answers again" in said[1]
    assert "secret" not in said[0] and "***" in said[0]


def test_a_database_that_stays_away_stops_the_run_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(outages, "DATABASE_POLL_S", 0.0)
    with pytest.raises(outages.DatabaseLost) as lost:
        outages.wait_for_database(_study(10**9), "postgresql://ablate@db/ablate", _operational("gone"),
                                  lambda line: None, wait_s=0.01)
    print(message(f"ablate: error: {lost.value}"))  # as the command line says a StudyError
    line = one_message(capsys.readouterr().out)
    assert "did not come back" in line and "run the same command again" in line


def test_an_offline_tracker_asks_mlflow_again_at_most_every_reconnect_s(tmp_path, monkeypatch, capsys):
    tracker = Tracker(load(str(TINY), "cpu"), describe("cpu"), tmp_path, reconnects=True)
    assert tracker.start_parent("grid") and not tracker.offline

    def down(*args, **kwargs):
        raise ConnectionError("[Errno 111] Connection refused")

    monkeypatch.setattr(tracker.client, "log_batch", down)
    assert tracker.log_metrics("run", {"x": 1.0}) is None and tracker.offline and tracker.outages == 1
    assert "asked every" in capsys.readouterr().err
    monkeypatch.undo()
    assert not tracker.reconnect()  # asked too soon after it went away
    monkeypatch.setattr(tracking, "RECONNECT_S", 0)
    assert tracker.reconnect() and not tracker.offline
    assert not tracker.reconnect()  # online: nothing to ask

"""A full disk through the CLI: one line naming the folder and the space needed, exit status 2, no traceback; and a
disk with less than a study needs refused before anything is measured or written."""
from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from messages import one_message

from ablate import cli
from ablate.run import full_disk

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
MIB = 2**20


def _optuna_commit_failed() -> optuna.exceptions.StorageInternalError:
    """Optuna's error for a commit SQLite refused on a full disk, chained as Optuna and SQLAlchemy chain it."""
    try:
        try:
            try:
                raise sqlite3.OperationalError("database or disk is full")
            except Exception as full:
                raise sqlalchemy.exc.OperationalError("INSERT INTO trials", {}, full) from full
        except sqlalchemy.exc.OperationalError as wrapped:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from wrapped
    except optuna.exceptions.StorageInternalError as error:
        return error


RAISED = {
    "ENOSPC": lambda: OSError(errno.ENOSPC, "No space left on device"),
    "Optuna's commit": _optuna_commit_failed,
}


@pytest.mark.parametrize("form", RAISED)
@pytest.mark.parametrize("command", ["run", "report"])
def test_a_full_disk_inside_a_command_is_one_line_and_exit_status_2(form, command, tmp_path, monkeypatch, capsys):
    def raises(args):
        raise RAISED[form]()

    monkeypatch.setattr(cli, f"_{command}", raises)
    monkeypatch.setattr(full_disk, "free", lambda folder: int(3.2 * MIB))
    results = tmp_path / "results"
    assert cli.main([command, str(TINY), "--device", "cpu", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    again = "run the same command again: it resumes where it stopped" if command == "run" else \
        "run the same command again"
    assert one_message(err) == (f"ablate: error: the disk holding {results.absolute()} is full (3.2 MiB free); free "
                                f"at least 201 MiB there and {again}")


def test_an_error_that_is_not_a_full_disk_still_raises(tmp_path, monkeypatch):
    def raises(args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(cli, "_run", raises)
    with pytest.raises(OSError, match="Input/output error"):
        cli.main(["run", str(TINY), "--device", "cpu", "--results", str(tmp_path / "results")])


def test_a_disk_without_room_for_a_study_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(full_disk, "free", lambda folder: 3 * MIB)
    results = tmp_path / "results"
    assert cli.main(["run", str(TINY), "--device", "cpu", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert one_message(err) == (f"ablate: error: the disk holding {results.absolute()} has 3.0 MiB free, and a study "
                                "needs at least 201 MiB: free some there, or choose another folder with --results")
    assert not results.exists()

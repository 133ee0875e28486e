"""A full disk is recognised in every form it reaches the command line in, and only then; it is said in one line
naming the folder, the space free and the space needed (`ablate.run.full_disk`).

The SQLite forms are real: SQLite raises SQLITE_FULL when a database reaches its `max_page_count` exactly as when
its disk is full, so SQLAlchemy and Optuna wrap it as they would a disk's, with no disk filled. The last test fills
a real one (a tmpfs) under a running study.
"""
from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from messages import one_message
from tmpfs import fill, mounted

from ablate.config.validate import StudyError
from ablate.run import full_disk
from ablate.run.full_disk import room, said

MIB = 2**20


def _capped(path: Path) -> sqlite3.Connection:
    """A database that holds no page more than it has: the next insert that needs one fails as on a full disk."""
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t (x BLOB)")
    connection.commit()
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count = {pages}")
    return connection


def _sqlite_full(tmp_path: Path) -> BaseException:
    with pytest.raises(sqlite3.OperationalError) as raised:
        _capped(tmp_path / "s.db").execute("INSERT INTO t VALUES (zeroblob(100000))")
    return raised.value


def _sqlalchemy_full(tmp_path: Path) -> BaseException:
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'a.db'}", creator=lambda: _capped(tmp_path / "a.db"))
    with pytest.raises(sqlalchemy.exc.OperationalError) as raised, engine.begin() as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (zeroblob(100000))")
    return raised.value


def _optuna_full(tmp_path: Path) -> BaseException:
    """Optuna's own storage, capped once its study exists: the trials' rows are what no longer fit."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    optuna.create_study(storage=url, study_name="s")
    capped = tmp_path / "optuna.db"

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(capped)
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")
        return connection

    storage = optuna.storages.RDBStorage(url, engine_kwargs={"creator": connect,
                                                             "poolclass": sqlalchemy.pool.NullPool})
    optuna_study = optuna.load_study(study_name="s", storage=storage)
    with pytest.raises(optuna.exceptions.StorageInternalError) as raised:
        for _ in range(1000):
            optuna_study.ask().set_user_attr("figures", "x" * 5000)
    assert sqlite3.connect(capped).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return raised.value


def _wrapped(error: BaseException) -> BaseException:
    """`error` as the context of another (raised while handling it, not `from` it): MLflow's and ablate's own."""
    try:
        try:
            raise error
        except BaseException:
            raise RuntimeError("could not log the measurement")  # not `from` it: the implicit context is what is tested
    except RuntimeError as wrapping:
        return wrapping


FULL = {
    "ENOSPC": lambda tmp: OSError(errno.ENOSPC, "No space left on device", str(tmp / "report.md")),
    "EDQUOT (a quota)": lambda tmp: OSError(errno.EDQUOT, "Disk quota exceeded"),
    "SQLite": _sqlite_full,
    "SQLite in SQLAlchemy": _sqlalchemy_full,
    "SQLite in SQLAlchemy in Optuna": _optuna_full,
    "ENOSPC as another error's context": lambda tmp: _wrapped(OSError(errno.ENOSPC, "No space left on device")),
}
NOT_FULL = {
    "permission": OSError(errno.EACCES, "Permission denied"),
    "no such file": FileNotFoundError(errno.ENOENT, "No such file or directory"),
    "a locked database": sqlite3.OperationalError("database is locked"),
    "the words elsewhere": RuntimeError("database or disk is full"),
    "a bad study": StudyError("unknown key 'spce'"),
}


@pytest.mark.parametrize("form", FULL)
def test_a_full_disk_is_recognised_however_it_is_wrapped(form, tmp_path):
    assert said(FULL[form](tmp_path), tmp_path, resumes=True) is not None


@pytest.mark.parametrize("form", NOT_FULL)
def test_other_errors_are_not_a_full_disk(form, tmp_path):
    assert said(NOT_FULL[form], tmp_path, resumes=True) is None
    assert said(_wrapped(NOT_FULL[form]), tmp_path, resumes=True) is None


def test_a_chain_that_loops_ends():
    one, other = ValueError("one"), ValueError("other")
    one.__context__, other.__context__ = other, one
    assert said(one, None, resumes=True) is None


def test_the_line_names_the_folder_the_space_free_and_the_space_needed(tmp_path, monkeypatch):
    monkeypatch.setattr(full_disk, "free", lambda folder: int(3.2 * MIB))
    error = OSError(errno.ENOSPC, "No space left on device")
    folder = tmp_path / "results" / "tiny"
    assert said(error, folder, resumes=True) == (
        f"the disk holding {folder} is full (3.2 MiB free); free at least 201 MiB there and run the same command "
        "again: it resumes where it stopped")
    assert said(error, folder, resumes=False).endswith("there and run the same command again")


def test_the_folder_is_the_errors_where_no_results_folder_is_known_or_it_is_on_another_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(full_disk, "free", lambda folder: 0)
    error = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "elsewhere" / "cache.bin"))
    assert f"holding {tmp_path / 'elsewhere'} is full" in said(error, None, resumes=True)
    assert f"holding {tmp_path / 'results'} is full" in said(error, tmp_path / "results", resumes=True)
    monkeypatch.setattr(full_disk, "_device", lambda path: hash("elsewhere" in str(path)))
    assert f"holding {tmp_path / 'elsewhere'} is full" in said(error, tmp_path / "results", resumes=True)


def test_a_disk_with_less_than_a_study_needs_is_refused_before_anything_is_measured(tmp_path, monkeypatch):
    room(tmp_path / "results", "--results")  # this machine's disk has room
    monkeypatch.setattr(full_disk, "free", lambda folder: 3 * MIB)
    with pytest.raises(StudyError) as refused:
        room(tmp_path / "results", "--results")
    assert str(refused.value) == (f"the disk holding {tmp_path / 'results'} has 3.0 MiB free, and a study needs at "
                                  "least 201 MiB: free some there, or choose another folder with --results")


@pytest.mark.slow
def test_a_disk_that_fills_under_a_study_stops_it_in_one_line_and_the_same_command_resumes_it(
        tmp_path, monkeypatch, capsys, mnist):
    """A real disk (a tmpfs) filled to the last byte after the third measurement: exit status 2, one line naming the
    study's folder, no traceback, both SQLite stores intact; with the space freed, the same command completes it."""
    from tiny_mnist import tiny_study

    from ablate.cli import main
    from ablate.run import objective

    study = tiny_study(tmp_path / "study")
    measure, measured = objective.run_in_fresh_process, []

    def then_fill(*args, **kwargs):
        figures = measure(*args, **kwargs)
        measured.append(1)
        if len(measured) == 3:
            fill(disk)
        return figures

    monkeypatch.setattr(full_disk, "room", lambda folder, option: None)  # the tmpfs is smaller than a study needs
    monkeypatch.setattr(objective, "run_in_fresh_process", then_fill)
    with mounted(tmp_path / "disk", 16 * MIB) as disk:
        command = ["run", str(study), "--device", "cpu", "--results", str(disk / "results")]
        capsys.readouterr()
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "Logging error" not in err, err
        lines = err.strip().splitlines()  # the last message: MLflow's outage and the progress line may come first
        last = one_message("\n".join(lines[max(i for i, line in enumerate(lines) if not line.startswith(" ")):]))
        assert last.startswith(f"ablate: error: the disk holding {disk / 'results' / 'tiny'} is full ("), err
        assert last.endswith("free); free at least 201 MiB there and run the same command again: it resumes where "
                             "it stopped"), err
        for store in (disk / "results" / "tiny" / "optuna.db", disk / "results" / "mlflow.db"):
            assert sqlite3.connect(store).execute("PRAGMA integrity_check").fetchone() == ("ok",), store
        (disk / "filler").unlink()
        assert main(command) == 0, capsys.readouterr().err
        assert (disk / "results" / "tiny" / "report" / "grid" / "summary.json").is_file()

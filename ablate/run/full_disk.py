"""A full disk, said in one line: the folder, the space free and the space needed, and that the same command resumes.

A disk fills under a study from outside it as often as from it (a shared machine's datasets, checkpoints, logs),
and the error reaches the command line in many forms: an OSError with errno ENOSPC (or EDQUOT, a quota) from a
report, the results CSV or a trial's files, or SQLite's SQLITE_FULL ("database or disk is full") wrapped by
SQLAlchemy, then by Optuna (`StorageInternalError`) or MLflow (`MlflowException`), each raised `from` the one
before. `said` walks the chain (`__cause__`, `__context__`) for any of them. Nothing is lost by stopping: SQLite
rolls the failed transaction back (its integrity check passes), the unfinished trial is marked interrupted on
resume and measured again, and the report and CSV are replaced whole (`ablate.store.files`) or not at all.

The space needed is measured, not guessed: about 31 KiB a measurement in optuna.db and mlflow.db, and some
10 MiB a study for the empty stores, the report (kept twice) and compiled graphs' caches (benchmarks/RESULTS.md,
"Space a study needs"). `NEEDED` asks for eight times a 500-measurement study.
"""
from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Iterator

from ablate.config.validate import StudyError

MEASUREMENT_BYTES = 31 * 2**10  # one measurement's rows in optuna.db and mlflow.db
STUDY_BYTES = 10 * 2**20  # the empty stores, the report twice, compiled graphs' caches
NEEDED = 8 * (500 * MEASUREMENT_BYTES + STUDY_BYTES)  # 201 MiB: eight times a 500-measurement study
SQLITE_FULL = 13  # SQLite's result code for "database or disk is full"


def said(error: BaseException, folder: Path | None, resumes: bool) -> str | None:
    """The line for `error` where a full disk is in its chain, else None. It names `folder` (the results folder,
    the study's in it where known), unless the error names a path on another disk; `resumes`: the command goes on
    where it stopped when run again (`ablate run`), rather than starting over."""
    full = _full(error)
    if full is None:
        return None
    named = Path(full.filename) if isinstance(full, OSError) and isinstance(full.filename, str) else None
    if folder is None or named is not None and _device(named) != _device(folder):
        folder = named.parent if named is not None else Path.cwd()
    where = folder.absolute()
    again = "run the same command again: it resumes where it stopped" if resumes else "run the same command again"
    return (f"the disk holding {where} is full ({_size(free(where))} free); free at least {_size(NEEDED)} there and "
            f"{again}")


def room(folder: Path, option: str) -> None:
    """Refuse, before anything is measured, a study whose `folder` sits on a disk with less than `NEEDED` free."""
    if (left := free(folder)) < NEEDED:
        raise StudyError(f"the disk holding {folder.absolute()} has {_size(left)} free, and a study needs at least "
                         f"{_size(NEEDED)}: free some there, or choose another folder with {option}")


def free(folder: Path) -> int:
    """The bytes free to this user on the disk that holds `folder` (or would, once made)."""
    return shutil.disk_usage(_existing(folder)).free


# The words a trial's failure (a line of text from its own process) carries when its disk filled.
FULL_WORDS = ("[Errno 28]", "[Errno 122]", "database or disk is full")


def in_words(text: str) -> bool:
    """Whether a failure said as text (a trial's, from its process) is a full disk."""
    return any(words in text for words in FULL_WORDS)


def chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and every error it was raised from or during (`__cause__`, `__context__`, a driver's `orig`)."""
    links, seen = [error], set()
    while links:
        link = links.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        links += [e for e in (link.__cause__, link.__context__, getattr(link, "orig", None))
                  if isinstance(e, BaseException)]


def _full(error: BaseException) -> BaseException | None:
    """The link of `error`'s chain that says a disk is full, or None."""
    operational: tuple[type[Exception], ...] = (sqlite3.OperationalError,)
    if (sqlalchemy := sys.modules.get("sqlalchemy.exc")) is not None:  # imported only where a store was opened
        operational += (sqlalchemy.OperationalError,)
    for link in chain(error):
        if isinstance(link, OSError) and link.errno in (errno.ENOSPC, errno.EDQUOT):
            return link
        if isinstance(link, operational) and (getattr(link, "sqlite_errorcode", None) == SQLITE_FULL
                                              or "database or disk is full" in str(link)):
            return link
    return None


def _existing(folder: Path) -> Path:
    """`folder`, or its nearest ancestor that exists."""
    folder = folder.absolute()
    while not folder.exists():
        folder = folder.parent
    return folder


def _device(path: Path) -> int:
    return os.stat(_existing(path)).st_dev


def _size(n: int) -> str:
    """Bytes as people read them: 3.2 MiB, 200 MiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n // scale} {unit}"
    return f"{n} bytes"

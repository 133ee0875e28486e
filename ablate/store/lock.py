"""One `ablate run` per study at a time: an OS file lock under results/STUDY/.

Two runs of one study would each recover the other's running trial as
interrupted and write the same SQLite files at once, so the second refuses.
`fcntl.flock` belongs to the open file: the kernel releases it when its
holder exits, however it dies (SIGKILL included), so there is never a stale
lock to clean up. The file is kept afterwards, never deleted: unlinking a
lock file lets a waiter and a newcomer lock two different files.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

LOCK_FILE = "run.lock"


class Busy(RuntimeError):
    """The study is locked by another live process; the message is one line for the user."""


@contextlib.contextmanager
def study_lock(folder: Path, study: str) -> Iterator[None]:
    """Hold `folder`/run.lock for the duration, or raise `Busy` naming the holder at once."""
    path = folder / LOCK_FILE
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # no O_TRUNC: the holder's note must survive a refused open
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
            raise Busy(f"study {study} is already running ({holder}; lock {path}); wait for it to finish or stop it "
                       "- several workers on one study need a server database (see `ablate worker --help`)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock

"""A small disk of the test's own, to fill for real: a tmpfs mounted on a folder of the test's (`mounted`), filled to
the last byte by a file that frees it again when removed (`fill`).

Mounting needs root or CAP_SYS_ADMIN, which the suite's machines have (they run as root); where it is refused - a
user's laptop, a container without the capability, another OS - the test is skipped, saying why.
"""
from __future__ import annotations

import contextlib
import errno
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted(folder: Path, size: int) -> Iterator[Path]:
    """`folder`, made and mounted as a tmpfs of `size` bytes for the block; unmounted after it."""
    if not sys.platform.startswith("linux") or shutil.which("mount") is None:
        pytest.skip("a tmpfs is mounted with Linux's mount(8), which this machine lacks")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip() or done.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True)  # lazy: a store still open lets go


def fill(folder: Path) -> Path:
    """A file in `folder` that takes every byte its disk has left; remove it and the space is free again."""
    filler = folder / "filler"
    chunk = 1 << 20
    with open(filler, "wb", buffering=0) as file:
        while chunk:
            try:
                file.write(b"\0" * chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                chunk //= 2  # what is left is less than a chunk: try smaller ones, down to a byte
    return filler

"""A dataset's tensors decoded once, then memory-mapped by every trial that needs them.

Every trial is a new interpreter, so without a cache each one parses the
dataset's files again (MNIST's idx files, a text tokenized by a Hugging Face
tokenizer: seconds for a large corpus). `cached` builds the tensors once,
saves them with `torch.save`, and later calls `torch.load(mmap=True)` them:
the pages are shared through the page cache, nothing is copied.

Where: ``$ABLATE_CACHE_DIR``, else ``.ablate-cache`` in the data root. The
file's name holds a digest of what it was built from (the key, and each source
file's path, size and modification time, and `FORMAT`), so a changed source is
a different file, never a stale one. Safe for several workers: each writes a
temporary file of its own and renames it into place (atomic on POSIX), and a
temporary file left by a killed process is removed by the next writer. Where
the folder cannot be written, the tensors are built every time, as before.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Sequence

import torch

CACHE_ENV = "ABLATE_CACHE_DIR"
FORMAT = 1  # bump when what a key holds changes


def cache_dir(data_root: Path) -> Path:
    return Path(os.environ.get(CACHE_ENV) or data_root / ".ablate-cache")


def cached(key: str, sources: Sequence[Path], build: Callable[[], dict[str, torch.Tensor]],
           data_root: Path) -> dict[str, torch.Tensor]:
    """`build()`'s tensors, from the cache when it holds them for these `sources` (built and stored if not)."""
    digest = hashlib.sha256(repr((key, FORMAT, [_stamp(p) for p in sources])).encode()).hexdigest()[:16]
    path = cache_dir(data_root) / f"{key}-{digest}.pt"
    if path.is_file():
        try:
            return torch.load(path, mmap=True, weights_only=True)
        except Exception:  # unreadable (a foreign or damaged file): build it again
            pass
    tensors = build()
    try:
        _store(path, tensors)
    except OSError:  # a read-only data root: no cache, the same tensors
        return tensors
    return torch.load(path, mmap=True, weights_only=True)


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def _store(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    for left in path.parent.glob(f"{path.name}.*.tmp"):  # a killed writer's: remove it if its process is gone
        pid = left.name.rsplit(".", 2)[-2]
        if pid.isdigit() and dead(int(pid)):
            left.unlink(missing_ok=True)
    partial = path.parent / f"{path.name}.{os.getpid()}.tmp"
    try:
        torch.save({k: v.contiguous() for k, v in tensors.items()}, partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def dead(pid: int) -> bool:
    """No process has this id (what a killed writer's leftovers are recognised by)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process
        return False
    return False

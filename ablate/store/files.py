"""Files a reader opens whole (the report, summary.json, the results CSV, a change's page) are replaced whole.

A kill or a full disk in the middle of a plain write leaves half a file where the previous one stood; a script
reading summary.json then fails on it. `replaced` writes beside the file and renames over it, which POSIX and
Windows do in one step, so a reader sees the old file or the new one, never part of either.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


@contextlib.contextmanager
def replaced(path: Path, newline: str | None = None) -> Iterator[TextIO]:
    """A text file to write `path`'s new content to (UTF-8; `newline` as `open` takes it): renamed over `path`,
    flushed to disk first, once the block ends; on an error inside it, removed, and `path` left as it was."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")  # same folder: the rename stays on one disk
    # Made as `open` would make `path` (0o666 less the umask), not mkstemp's 0o600: the renamed file keeps the mode.
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(descriptor, "w", encoding="utf-8", newline=newline) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise

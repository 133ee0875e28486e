"""Library messages go to a log file in the results folder, not into the user's terminal.

MLflow announces its database migrations at INFO, torch warns about deprecations and a missing CUDA
runtime, Inductor prints compiler notes: useful when something goes wrong, noise in the middle of the
progress line. `to_log_file` sends this process's logging (MLflow's own handlers included) and Python
warnings to the file; trial processes started afterwards send their stdout and stderr there too
(`trial_output_to_log_file`), since a trial reports its result and its errors over a pipe, not by printing.
The progress line, the table and ablate's own one-line messages are printed as before.
"""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Iterator

LOG_NAME = "ablate.log"
HANDLER = "ablate-log-file"
TRIAL_LOG_ENV = "ABLATE_TRIAL_LOG"  # inherited by the trial processes: where their output goes
# Loggers that replace their handlers at import and do not propagate to the root (MLflow's four).
OWN_HANDLERS = ("mlflow", "sqlalchemy.engine", "alembic", "huey")


def to_log_file(path: Path) -> Path:
    """Send this process's library logging and warnings, and later trial processes' output, to `path`."""
    import mlflow  # noqa: F401 - configures its loggers at import: replaced below, not after

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.set_name(HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER]:  # an earlier run in this process
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)  # also keeps logging's last-resort handler (stderr) from printing warnings
    for name in OWN_HANDLERS:
        logging.getLogger(name).handlers = [handler]
    logging.captureWarnings(True)  # warnings.warn(...) through the "py.warnings" logger, so into the file
    os.environ[TRIAL_LOG_ENV] = str(path)
    return path


def trial_output_to_log_file() -> None:
    """In a trial process: its stdout and stderr (file descriptors 1 and 2, so C++ messages too) to the log."""
    if not (path := os.environ.get(TRIAL_LOG_ENV)):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:  # its folder is gone (a results folder removed while its study ran): output stays where it was
        return
    with contextlib.suppress(OSError):
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)


@contextlib.contextmanager
def trial_log_set() -> Iterator[None]:
    """Trial processes started inside send their output to the log file; those started after, not (a test
    suite runs several studies in one process)."""
    before = os.environ.get(TRIAL_LOG_ENV)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TRIAL_LOG_ENV, None)
        else:
            os.environ[TRIAL_LOG_ENV] = before

"""Library messages go to a log file in the results folder, not into the user's terminal.

MLflow announces its database migrations at INFO, torch warns about deprecations and a missing CUDA
runtime, Inductor prints compiler notes: useful when something goes wrong, noise in the middle of the
progress line. `to_log_file` sends this process's logging (MLflow's own handlers included) and Python
warnings to the file; trial processes started afterwards send their stdout and stderr there too
(`trial_output_to_log_file`), since a trial reports its result and its errors over a pipe, not by printing.
The progress line, the table and ablate's own one-line messages are printed as before.

Every command does so, not only `ablate run`: `hold` at its start keeps what libraries say until the command
knows its log (the study's, once the study file is read: torch and torchao speak while it is), and `settle`
at its end writes what no study's log took to the results folder's own log, made only when there is
something to write (`ablate list` and `ablate new` name no study).

A library logger that prints with a handler of its own (torch's, Optuna's, transformers') is claimed however
late its library is imported: the loggers made while a command runs are of a class (`logging.setLoggerClass`)
that claims such a handler as it is added, and those made before are claimed when the command starts. So no
command imports a library early for its loggers' sake.
"""
from __future__ import annotations

import collections
import contextlib
import io
import logging
import os
import sys
from pathlib import Path
from typing import Iterator

LOG_NAME = "ablate.log"
HANDLER = "ablate-log-file"
TRIAL_LOG_ENV = "ABLATE_TRIAL_LOG"  # inherited by the trial processes: where their output goes
# Loggers that replace their handlers at import and do not propagate to the root (MLflow's four).
OWN_HANDLERS = ("mlflow", "sqlalchemy.engine", "alembic", "huey")


class _Held(logging.Handler):
    """Holds library messages (the last 10,000) until a log file takes them."""

    def __init__(self) -> None:
        super().__init__()
        self.records: collections.deque[logging.LogRecord] = collections.deque(maxlen=10_000)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _LogFile(logging.FileHandler):
    """A log file whose folder is made when the file is opened (at once, or at the first message: `delay`)."""

    def _open(self) -> io.TextIOWrapper:
        try:
            Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
            return super()._open()
        except OSError:  # a results folder that cannot be written: the command says so; the messages are dropped
            return open(os.devnull, "w", encoding=self.encoding)  # the handler closes it

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a full disk: the message is dropped, not printed with a traceback
            return
        super().handleError(record)


def hold() -> None:
    """At a command's start: this process's library logging and warnings are held, not printed, until
    `to_log_file` (or `settle`) names where they go."""
    _install(_Held())


def to_log_file(path: Path, *, lazy: bool = False) -> Path:
    """Send this process's library logging and warnings (those held since `hold` first), and later trial
    processes' output, to `path`. `lazy`: the file is made at the first message, and MLflow, which a command
    with no study does not use, is not imported to configure its loggers."""
    if not lazy:
        import mlflow  # noqa: F401 - configures its loggers at import: replaced below, not after
    handler = _LogFile(path, delay=lazy)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for held in _install(handler):
        for record in held.records:
            handler.handle(record)
    if not lazy:
        os.environ[TRIAL_LOG_ENV] = str(path)
    return path


@contextlib.contextmanager
def trials_to(path: Path) -> Iterator[None]:
    """Trial processes started inside send their output to `path`: for a command that runs a trial but logs nothing
    to MLflow (`ablate diagnose`), so has no reason to import it (`to_log_file`). A trial opens the file whether it
    says something or not: an empty one is removed at the end, and the folders made for it."""
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with trial_log_set():
            os.environ[TRIAL_LOG_ENV] = str(path)
            yield
    finally:
        with contextlib.suppress(OSError):
            if path.stat().st_size == 0:
                path.unlink()
                for folder in made:  # innermost first; one that holds something stays
                    folder.rmdir()


def settle(fallback: Path) -> None:
    """At a command's end: what is still held, and what libraries say after, goes to `fallback` (made only
    when there is something to write)."""
    if any(isinstance(h, _Held) for h in logging.getLogger().handlers):
        to_log_file(fallback, lazy=True)


def _install(handler: logging.Handler) -> list[_Held]:
    """`handler` takes this process's library messages in place of the previous one; what it replaced that
    still held messages."""
    handler.set_name(HANDLER)
    root = logging.getLogger()
    replaced = [h for h in root.handlers if h.get_name() == HANDLER]  # an earlier command in this process
    for old in replaced:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)  # also keeps logging's last-resort handler (stderr) from printing warnings
    _claim(OWN_HANDLERS)
    if not issubclass(logging.getLoggerClass(), _ClaimingLogger):  # a library imported from now on: claimed too
        logging.setLoggerClass(_ClaimingLogger)
    logging.captureWarnings(False)  # anew: whatever replaced `warnings.showwarning` since (a test runner) is undone
    logging.captureWarnings(True)  # warnings.warn(...) through the "py.warnings" logger, so into the file
    return [h for h in replaced if isinstance(h, _Held)]


def _current() -> logging.Handler | None:
    """The handler that takes this process's library messages now (held, or a log file); None outside a command."""
    return next((h for h in logging.getLogger().handlers if h.get_name() == HANDLER), None)


class _Claimed(logging.Handler):
    """A library logger's own handler that would print to the terminal, claimed: while a command holds library
    messages, what it is given goes to the command's handler of the moment (held, then the log file; looked up
    at each message, so a log named later takes it), unless the message reaches that handler anyway through the
    root. Outside a command (a test calling a helper) the library's handler prints as it meant to."""

    def __init__(self, logger: logging.Logger, printing: logging.Handler) -> None:
        super().__init__(printing.level)
        self.logger, self.printing = logger, printing
        self.filters = list(printing.filters)
        # The library's own marks too (not its stream): torch removes the handlers it made by a mark when its log
        # settings change.
        for key, value in vars(printing).items():
            if key != "stream":
                self.__dict__.setdefault(key, value)

    def emit(self, record: logging.LogRecord) -> None:
        current = _current()
        if current is None:
            self.printing.handle(record)
        elif not _reaches_root(self.logger):
            current.handle(record)

    def close(self) -> None:
        self.printing.close()
        super().close()

    # A library (or a test runner's log capture) takes its handler back by the handler it added, and
    # `Logger.removeHandler` looks it up by equality: the claimed one stands for it, on any logger. Otherwise
    # each command of a long-lived process would leave the handlers added and taken back around it claimed for good.
    def __eq__(self, other: object) -> bool:
        return other is self or other is self.printing

    __hash__ = logging.Handler.__hash__


def _reaches_root(logger: logging.Logger) -> bool:
    """Whether `logger`'s messages propagate to the root's handlers (as `logging.Logger.callHandlers` walks)."""
    at: logging.Logger | None = logger
    while at is not None and at is not logging.getLogger():
        if not at.propagate:
            return False
        at = at.parent
    return True


class _ClaimingLogger(logging.Logger):
    """The class of the loggers a library makes while a command runs (`logging.setLoggerClass`): a handler that
    would print to the terminal, added when the library is imported, is claimed as it is added, so a library
    imported at any point of a command speaks into its log."""

    def addHandler(self, hdlr: logging.Handler) -> None:
        super().addHandler(_Claimed(self, hdlr) if _current() is not None and _prints(hdlr) else hdlr)


def _claim(names: tuple[str, ...] = ()) -> None:
    """Claim the printing handlers of loggers made before the command held library messages (and every handler
    of `names`: MLflow's print through a stream of its own)."""
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            logger.handlers = [_Claimed(logger, h) if not isinstance(h, (_Claimed, logging.FileHandler)) and
                               (name in names or _prints(h)) else h for h in logger.handlers]


def _prints(handler: logging.Handler) -> bool:
    """Whether `handler` writes to the terminal (torch's `_StderrHandler`, Optuna's and transformers'
    StreamHandlers)."""
    terminal = {id(s) for s in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__) if s is not None}
    return not isinstance(handler, logging.FileHandler) and id(getattr(handler, "stream", None)) in terminal


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

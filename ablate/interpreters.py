"""Trial interpreters started ahead: `import torch` off the critical path, and never beside a measurement.

Each measurement still runs in its own freshly exec'ed interpreter (ablate.trial
says why: layout luck). What changes is when that interpreter starts. Starting
one costs seconds - torch, and torchvision, whose `ops` import TorchDynamo and
Inductor (2.9 s of 5.8 s on a 2-core Xeon) - and that used to sit between every
two trials. Now interpreters are started ahead and wait, imported, for a trial.

They must not slow the trial that runs meanwhile. A trial's *measured stretch*
runs from its model preparation (TorchScript's scripting, part of the one-off
cost) to the end of its training loop (timed windows, and time to accuracy when
it trains for accuracy). Interpreters are started only outside it - when the
running trial reports that its loop is over (its last evaluation and the
study's bookkeeping still ahead), or between trials - and a trial asks before
its measured stretch begins: it waits until every interpreter still importing
has finished (its `import_wait_s`). So no import overlaps a measured stretch:
each interpreter records when its import began and ended, each trial when its
measured stretch began and ended (both on the system-wide monotonic clock), and
`overlaps` checks a study's timeline (tests/test_interpreters.py).

How many to keep ahead: when fewer than two are, they are topped up to
`AHEAD`, so that imports start in pairs - two import side by side on two cores
in about the time of one (6.6 s each against 5.8 s alone, 2-core Xeon) - and
a trial waits for a pair at most every other time. A prepared interpreter holds
about 0.75 GB resident on a CPU, most of it torch's shared libraries, which
the interpreters share; CUDA is not initialised until a trial uses it. If the
study is stopped or killed, the prepared interpreters read end-of-file on their
pipe and exit: none outlives the study.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import signal
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Callable, Iterator

STOP_GRACE_S = 5.0
AHEAD = 3  # interpreters kept ready (or importing) for the next trials, refilled when fewer than 2 are


class Died(RuntimeError):
    """The interpreter's process ended without answering; the message says how."""


@cache
def _context() -> mp.context.BaseContext:
    return mp.get_context("spawn")  # a new interpreter and address-space layout each time (ablate.trial)


def _preload() -> None:
    """What every trial imports, imported before it is handed one (`import torch` alone is most of it)."""
    import torch  # noqa: F401
    import torchvision  # noqa: F401 - its ops import TorchDynamo and Inductor

    import strategies  # noqa: F401
    from ablate import data, measure, models, train  # noqa: F401


def _main(conn: Any, preload: Callable[[], None]) -> None:
    """The interpreter: import, say when, then run the one job the parent sends (or exit on end-of-file)."""
    from ablate.noise import trial_output_to_log_file

    trial_output_to_log_file()  # import-time warnings too
    try:
        preload()
        conn.send(("imported", time.perf_counter()))  # CLOCK_MONOTONIC on Linux: the parent's clock too
        job = conn.recv()
    except (EOFError, OSError, KeyboardInterrupt):  # the study ended before it needed this interpreter
        return
    from ablate import trial

    trial.serve(conn, *job)


@dataclass
class Interpreter:
    process: mp.process.BaseProcess
    conn: Any
    import_began: float  # just before the process was started: its whole start-up counts as its import
    import_ended: float | None = None
    recorded: bool = False  # its import is in a trial's timeline

    @property
    def importing(self) -> bool:
        return self.import_ended is None

    def wait_imported(self, deadline: float | None) -> bool:
        """Block until its import is done (True) or `deadline` (monotonic) passes (False); raises `Died`."""
        if not self.importing:
            return True
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            if not self.conn.poll(left):
                return False
            message = self.conn.recv()
        except (EOFError, OSError):
            message = None
        if not message or message[0] != "imported":
            self.stop()
            raise Died(death(self.process.exitcode))
        self.import_ended = message[1]
        return True

    def finish(self) -> None:
        """After its result: wait for it to exit (it removes its compile cache on the way out)."""
        self.process.join()
        self.conn.close()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still alive after a grace period; closes the pipe."""
        process = self.process
        if process.pid is not None:
            if process.is_alive():
                process.terminate()
                process.join(STOP_GRACE_S)
            if process.is_alive():
                process.kill()
            process.join()
        self.conn.close()


@dataclass
class Interpreters:
    """The prepared interpreters of one study process; a context manager that stops the unused ones."""

    preload: Callable[[], None] = _preload
    ahead: list[Interpreter] = field(default_factory=list)
    imports: list[tuple[float, float]] = field(default_factory=list)  # every finished import, for the timeline

    def __enter__(self) -> "Interpreters":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        while self.ahead:
            self.ahead.pop().stop()

    def start(self) -> Interpreter:
        ctx = _context()
        parent_end, child_end = ctx.Pipe(duplex=True)
        # Not a daemon: a trial's DataLoader workers are its children, which a daemon may not have.
        process = ctx.Process(target=_main, args=(child_end, self.preload), name="ablate-trial")
        began = time.perf_counter()
        with ctrl_c_blocked():  # the child inherits the blocked signal: Ctrl-C is the study's to handle
            process.start()
        child_end.close()
        return Interpreter(process, parent_end, began)

    def refill(self) -> None:
        """Fewer than two ahead (ready or importing): start interpreters until `AHEAD` are.

        Call only outside a measured stretch: the next one to begin waits for them (`quiet`).
        """
        self.ahead = [i for i in self.ahead if i.process.is_alive() or not i.importing]
        if len(self.ahead) < 2:
            while len(self.ahead) < AHEAD:
                self.ahead.append(self.start())

    def take(self, deadline: float | None) -> Interpreter:
        """The next trial's interpreter, imported: the oldest one ahead, else a new one (a cold start)."""
        for attempt in range(2):  # one that died while waiting (killed, out of memory) gets one replacement
            interpreter = self.ahead.pop(0) if self.ahead else self.start()
            try:
                if not interpreter.wait_imported(deadline):
                    raise TimeoutError
            except Died:
                if attempt:
                    raise
                continue
            except BaseException:  # a timeout, Ctrl-C: it is nobody's now
                interpreter.stop()
                raise
            self._record(interpreter)
            return interpreter
        raise AssertionError("unreachable")

    def quiet(self, deadline: float | None) -> float:
        """Wait until no interpreter ahead is importing (a measured stretch begins); returns the seconds waited."""
        began = time.perf_counter()
        for interpreter in list(self.ahead):
            try:
                if not interpreter.wait_imported(deadline):
                    raise TimeoutError
                self._record(interpreter)
            except Died:
                self.ahead.remove(interpreter)
        return time.perf_counter() - began

    def _record(self, interpreter: Interpreter) -> None:
        if not interpreter.recorded:
            interpreter.recorded = True
            self.imports.append((interpreter.import_began, interpreter.import_ended))

    def drain_imports(self) -> list[tuple[float, float]]:
        """The imports finished since the last call (each goes into one trial's timeline)."""
        spans, self.imports = self.imports, []
        return spans


def overlaps(imports: list[tuple[float, float]], measured: list[tuple[float, float]]) -> list[tuple]:
    """Every (import, measured stretch) pair that share a moment: none, if the scheme above holds."""
    return [(i, m) for i in imports for m in measured if i[0] < m[1] and m[0] < i[1]]


@contextlib.contextmanager
def ctrl_c_blocked() -> Iterator[None]:
    """SIGINT blocked while an interpreter starts, so it starts with it blocked.

    A terminal's Ctrl-C reaches the whole process group; a trial that got it would print its own traceback
    (often from inside `import torch`) beside the study's one line. The study stops its trial itself; a
    Ctrl-C that comes meanwhile is delivered here when the block is lifted.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (the kernel's out-of-memory killer sends it when memory runs out)" if name == "SIGKILL" else ""
        return f"killed: the trial process was killed by {name}{hint}"
    return f"crashed: the trial process exited with status {exitcode} without sending a result"

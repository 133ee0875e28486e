"""Trial interpreters started ahead: `import torch` off the critical path, and never beside a measurement.

Each measurement still runs in its own freshly exec'ed interpreter (ablate.trial.process
says why: layout luck). What changes is when that interpreter starts. Starting
one costs seconds - torch, and torchvision, whose `ops` import TorchDynamo and
Inductor, about half of it (docs/evidence.md, "Evidence: trial processes") -
which would otherwise sit between every two trials. So interpreters are
started ahead and wait, imported, for a trial.

They must not slow the trial that runs meanwhile. A trial's *measured stretch*
runs from its model preparation (TorchScript's scripting, part of the one-off
cost) to the end of its training loop (timed windows, and time to accuracy when
it trains for accuracy), less the warm-up of a run that times windows only.
When one begins, the trial tells the study, which stops every interpreter still
importing (SIGSTOP: a stopped process takes no CPU time) before it lets the
trial go on; when it ends, they are continued. So imports run only in the
unmeasured time - data loading, warm-up, the last evaluation, the study's
bookkeeping - and no trial waits at the start of its measured stretch. Each
interpreter records when it ran (from its start to its import's end, less its
stops), each trial when it measured, both on the system-wide monotonic clock,
and `overlaps` checks a study's timeline (tests/end_to_end/test_end_to_end.py). A trial
waits only when it is launched before any interpreter has finished importing;
that wait is part of its start-up (`startup_s`, from launch to first batch).

`AHEAD` are kept ahead, topped up between trials and whenever a measured
stretch ends. A prepared interpreter holds about 0.75 GB resident on a CPU,
most of it torch's shared libraries, which the interpreters share; CUDA is not
initialised until a trial uses it. None outlives the study: an interpreter
that is waiting reads end-of-file on its pipe when the study ends, however it
ends, and exits; one that is importing - perhaps stopped - is killed by the
kernel when the study process dies (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any, Callable, Iterator

STOP_GRACE_S = 5.0
ARM_S = 30.0  # an interpreter says "armed" milliseconds after it starts: one silent this long is stuck
AHEAD = 3  # interpreters kept ready (or importing) for the next trials
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Died(RuntimeError):
    """The interpreter's process ended without answering; the message says how."""


@cache
def _context() -> mp.context.SpawnContext:
    return mp.get_context("spawn")  # a new interpreter and address-space layout each time (ablate.trial.process)


def _preload(libraries: tuple[str, ...] = ()) -> None:
    """What every trial imports, imported before it is handed one (`import torch` alone is most of it), and the
    `libraries` its study's model is built from (`ablate.workload.library_models.preloads`)."""
    import torch  # noqa: F401
    import torchvision  # noqa: F401 - its ops import TorchDynamo and Inductor

    import strategies  # noqa: F401
    from ablate.trial import loop, measure  # noqa: F401
    from ablate.workload import data, models  # noqa: F401

    for name in libraries:
        with contextlib.suppress(ImportError):  # a missing extra is the trial's to report, in its own words
            importlib.import_module(name)


def _die_with(parent: int) -> None:
    """SIGKILL this process when the study's process dies: a stopped interpreter would not read end-of-file."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the study continues them before it exits
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def _main(conn: Any, preload: Callable[[], None], parent: int) -> None:
    """The interpreter: import, say when, then run the one job the parent sends (or exit on end-of-file)."""
    _die_with(parent)
    from ablate.trial.library_log import trial_output_to_log_file

    trial_output_to_log_file()  # import-time warnings too
    try:
        conn.send(("armed",))  # from here on the study may stop it: it dies with the study all the same
        preload()
        conn.send(("imported", time.perf_counter()))  # CLOCK_MONOTONIC on Linux: the parent's clock too
        job = conn.recv()
    except (EOFError, OSError, KeyboardInterrupt):  # the study ended before it needed this interpreter
        return
    serve, *args = job  # ablate.trial.process.serve, sent by reference: this module stays below the trial it runs
    serve(conn, *args)
    _leave()


def _leave() -> None:
    """Exit at once once the result is sent. An interpreter that imported torch takes most of a second to finalize,
    and the study waits for that exit before its next trial: a real share of a short measurement, and of a study
    (docs/evidence.md, "Evidence: trial processes"). Nothing in finalization is the trial's: its result is sent,
    its compile cache removed (`process.serve`), and what is left to do here is the log's flush and the children's
    end (DataLoader workers, as multiprocessing's own exit handler would end them)."""
    import logging
    import sys

    for child in mp.active_children():
        child.terminate()
    for child in mp.active_children():
        child.join(STOP_GRACE_S)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


@dataclass
class Interpreter:
    process: mp.process.BaseProcess
    conn: Any
    import_began: float  # just before the process was started: its whole start-up counts as its import
    import_ended: float | None = None
    recorded: bool = False  # its import is in a trial's timeline
    armed: bool = False  # it will die with the study (`_die_with`), so it may be stopped
    stops: list[tuple[float, float | None]] = field(default_factory=list)  # (stopped, continued) while importing

    @property
    def importing(self) -> bool:
        return self.import_ended is None

    @property
    def pid(self) -> int:
        pid = self.process.pid
        assert pid is not None  # started by `Interpreters.start` before anyone holds it
        return pid

    @property
    def stopped(self) -> bool:
        return bool(self.stops) and self.stops[-1][1] is None

    def pause(self) -> None:
        """SIGSTOP it if it is still importing; returns once the kernel has stopped it. Raises `Died`, also
        for one that never said "armed": the trial waiting on this pause must not wait on it for ever."""
        deadline = time.monotonic() + ARM_S
        while self.importing and not self.armed:  # a few milliseconds after its start
            if not self._hear(deadline):
                self.stop()
                raise Died(f"it did not start within {ARM_S:.0f} s")
        if self.stopped or not self.importing or not self.process.is_alive():
            return
        os.kill(self.pid, signal.SIGSTOP)
        _wait_stopped(self.pid)
        self.stops.append((time.perf_counter(), None))

    def resume(self) -> None:
        if self.stopped:
            self.stops[-1] = (self.stops[-1][0], time.perf_counter())  # before SIGCONT: the span errs wide
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)

    def ran(self) -> list[tuple[float, float]]:
        """When it ran while importing: its import's span less its stops (imported: `import_ended` is known)."""
        ended = self.import_ended
        assert ended is not None, "asked before its import ended"
        spans: list[tuple[float, float]] = []
        begun: float | None = self.import_began
        for stopped, continued in self.stops:
            if stopped >= ended:
                break
            assert begun is not None  # only the last stop may be not yet continued (`pause` after `resume`)
            spans.append((begun, stopped))
            begun = continued
        if begun is not None and begun < ended:
            spans.append((begun, ended))
        return spans

    def wait_imported(self, deadline: float | None) -> bool:
        """Block until its import is done (True) or `deadline` (monotonic) passes (False); raises `Died`."""
        self.resume()
        while self.importing:
            if not self._hear(deadline):
                return False
        return True

    def _hear(self, deadline: float | None) -> bool:
        """Read its next message, or False when `deadline` passes first; raises `Died` when it died."""
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            if not self.conn.poll(left):
                return False
            message = self.conn.recv()
        except (EOFError, OSError):
            message = None
        if message == ("armed",):
            self.armed = True
        elif message and message[0] == "imported":
            self.import_ended = message[1]
        else:
            self.stop()
            raise Died(death(self.process.exitcode))
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
                self.resume()  # a stopped process acts on SIGTERM once continued
                process.join(STOP_GRACE_S)
            if process.is_alive():
                process.kill()
            process.join()
        self.conn.close()


@dataclass
class Interpreters:
    """The prepared interpreters of one study process; a context manager that stops the unused ones."""

    preload: Callable[..., None] = _preload
    libraries: tuple[str, ...] = ()  # modules the study's model needs besides (`preload` is called with them)
    keep: int = AHEAD  # interpreters kept ahead; 0 for one trial with none after it (`ablate diagnose`)
    ahead: list[Interpreter] = field(default_factory=list)
    imports: list[tuple[float, float]] = field(default_factory=list)  # every finished import, for the timeline
    last_exit: float | None = None  # perf_counter when the last trial's process was gone: the next one's hand-off

    def __enter__(self) -> Interpreters:
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
        preload = partial(self.preload, self.libraries) if self.libraries else self.preload
        process = ctx.Process(target=_main, args=(child_end, preload, os.getpid()), name="ablate-trial")
        began = time.perf_counter()
        with ctrl_c_blocked():  # the child inherits the blocked signal: Ctrl-C is the study's to handle
            process.start()
        child_end.close()
        return Interpreter(process, parent_end, began)

    def refill(self) -> None:
        """Continue those stopped, and start interpreters until `keep` are ahead (ready or importing).

        Call only outside a measured stretch: the next one to begin stops them (`pause`).
        """
        self.resume()
        self.ahead = [i for i in self.ahead if i.process.is_alive() or not i.importing]
        while len(self.ahead) < self.keep:
            self.ahead.append(self.start())

    def pause(self) -> float:
        """A measured stretch begins: stop every interpreter still importing; returns the seconds it took."""
        began = time.perf_counter()
        for interpreter in list(self.ahead):
            try:
                interpreter.pause()
            except Died:
                self.ahead.remove(interpreter)
        return time.perf_counter() - began

    def resume(self) -> None:
        for interpreter in self.ahead:
            interpreter.resume()

    def take(self, deadline: float | None) -> Interpreter:
        """The next trial's interpreter, imported: the oldest one ahead, else a new one (a cold start)."""
        self.resume()
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

    def wait_all(self, deadline: float | None) -> None:
        """Until every interpreter ahead has imported (or died: it is dropped)."""
        for interpreter in list(self.ahead):
            try:
                if not interpreter.wait_imported(deadline):
                    raise TimeoutError
                self._record(interpreter)
            except Died:
                self.ahead.remove(interpreter)

    def _record(self, interpreter: Interpreter) -> None:
        if not interpreter.recorded:
            interpreter.recorded = True
            self.imports.extend(interpreter.ran())

    def drain_imports(self) -> list[tuple[float, float]]:
        """The imports finished since the last call (each goes into one trial's timeline)."""
        spans, self.imports = self.imports, []
        return spans


def _wait_stopped(pid: int) -> None:
    """Until /proc says `pid` is stopped (a signal is delivered asynchronously), or it is gone."""
    stat = f"/proc/{pid}/stat"
    for _ in range(10_000):  # at most about a second; a stop takes microseconds
        try:
            with open(stat) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):  # gone, or no /proc (not Linux)
            return
        if state in "TtZX":
            return
        time.sleep(0.0001)


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

"""`ablate` killed outright at a fixed point of its work, without a hook in the product:

    python -m benchmarks.chaos.kill_at POINT N -- run STUDY --device cpu --results DIR

wraps the function(s) where POINT happens, then calls `ablate.cli.main` with the arguments after `--`. At the N-th
time POINT is reached the whole process group gets SIGKILL (the caller starts this with `start_new_session=True`,
so the trial interpreters die with it), as a power cut or the kernel's OOM killer would leave the study. Before
it, one line naming the point and what had happened goes to the file `$CHAOS_FIRED` (appended, synced), so the
caller knows the kill came from here, and where; a run that never reaches POINT ends as it would have.

POINT:
- `plan`: once N trials are queued (WAITING) in the storage: in a study's first run, N slots of its plan.
- `result`: once the N-th measurement's result is stored (`ablate.store.records.result`), before Optuna has its
  end and before its MLflow run is finished.
- `measurement`: once Optuna has recorded the end of the N-th trial this process ran (a callback on `optimize`).
- `report`: while the report is written, half-way through the N-th text file it writes (`ablate.render.report.build`);
  where it writes fewer, as it returns.
- `end`: in the MLflow wrap-up (`ablate.tracking.parent_run.ParentRun.finish`), before its N-th write to MLflow;
  where it makes fewer, as it returns.

Only stdlib at import: multiprocessing's spawn imports this module again in every trial interpreter.
"""
from __future__ import annotations

import builtins
import functools
import importlib
import io
import os
import signal
import sys
import time
from typing import Any, Callable

FIRED_ENV = "CHAOS_FIRED"
POINTS = ("plan", "result", "measurement", "report", "end")
NOT_SET_UP = 3  # exit status where a point cannot be set up: the product moved the function it names


def fire(point: str, n: int, what: str) -> None:
    """Say where, then SIGKILL the whole process group (this process included)."""
    if path := os.environ.get(FIRED_ENV):  # os-level: `open` may be the report point's own
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, f"{point} {n}: {what}\n".encode())
        os.fsync(fd)
        os.close(fd)
    os.killpg(0, signal.SIGKILL)
    time.sleep(60)  # the signal is on its way


def _target(path: str) -> tuple[Any, str]:
    """(owner, attribute) of a dotted name: a module's function or a class's method."""
    module, _, rest = path.partition(":")
    owner: Any = importlib.import_module(module)
    *parents, name = rest.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    if not callable(getattr(owner, name, None)):
        raise AttributeError(f"{path} is not a function")
    return owner, name


def _wrap(path: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    owner, name = _target(path)
    original = getattr(owner, name)
    setattr(owner, name, functools.wraps(original)(make(original)))


class _Counter:
    def __init__(self, point: str, n: int) -> None:
        self.point, self.n, self.count = point, n, 0

    def add(self, k: int, what: str) -> None:
        """`k` more events; fires once the N-th is reached."""
        self.count += k
        if self.count >= self.n:
            fire(self.point, self.n, f"{what}; {self.count} counted")


def _plan(counter: _Counter) -> None:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, study_id: int, template_trial: Any = None) -> Any:
            got = original(self, study_id, template_trial)
            if template_trial is not None and template_trial.state.name == "WAITING":
                a = template_trial.user_attrs
                counter.add(1, f"trial #{got.number} queued ({a.get('combination')}, block {a.get('block')})")
            return got
        return wrapper

    # Where every queued trial of a database storage is written (enqueue_trial, add_trial(s), a cached storage).
    _wrap("optuna.storages:RDBStorage._create_new_trial", make)


def _result(counter: _Counter) -> None:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(trial: Any, *args: Any, **kwargs: Any) -> Any:
            got = original(trial, *args, **kwargs)
            counter.add(1, f"trial #{trial.number}'s result stored, its end not yet")
            return got
        return wrapper

    _wrap("ablate.store.records:result", make)


def _measurement(counter: _Counter) -> None:
    def callback(study: Any, trial: Any) -> None:
        counter.add(1, f"trial #{trial.number} ended in Optuna ({trial.state.name}, "
                       f"{trial.user_attrs.get('state', '-')})")

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, callbacks: Any = None, **kwargs: Any) -> Any:
            return original(self, *args, callbacks=[*(callbacks or []), callback], **kwargs)
        return wrapper

    _wrap("optuna:Study.optimize", make)


class _Torn:
    """A text file whose first write stops half-way, then the kill."""

    def __init__(self, file: Any, name: str, fire_now: Callable[[str], None]) -> None:
        self._file, self._name, self._fire = file, name, fire_now

    def write(self, text: str) -> int:
        self._file.write(text[:len(text) // 2])
        self._file.flush()
        self._fire(f"{self._name} written half-way ({len(text) // 2} of {len(text)} characters)")
        return 0

    def __enter__(self) -> _Torn:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def _report(counter: _Counter) -> None:
    real_open = builtins.open

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            def opening(file: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
                got = real_open(file, mode, *a, **k)
                if "b" in mode or not set(mode) & set("wax+"):
                    return got
                counter.count += 1
                if counter.count < counter.n:
                    return got
                name = os.path.basename(os.readlink(f"/proc/self/fd/{file}") if isinstance(file, int) else str(file))
                return _Torn(got, name, lambda what: fire(counter.point, counter.n, what))

            builtins.open = io.open = opening
            try:
                got = original(*args, **kwargs)
            finally:
                builtins.open = io.open = real_open
            fire(counter.point, counter.n, f"the report built, {counter.count} text file(s) written whole")
            return got
        return wrapper

    _wrap("ablate.render.report:build", make)


def _end(counter: _Counter) -> None:
    writes = ("log_metrics", "finish_parent", "finish_trial", "log_report")
    inside = [False]

    def tracked(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if inside[0]:
                counter.count += 1
                if counter.count >= counter.n:
                    fire(counter.point, counter.n, f"in the wrap-up, before its write #{counter.count} to MLflow "
                                                   f"({original.__name__})")
            return original(self, *args, **kwargs)
        return wrapper

    def finish(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            inside[0] = True
            try:
                got = original(*args, **kwargs)
            finally:
                inside[0] = False
            fire(counter.point, counter.n, f"the wrap-up returned after {counter.count} write(s) to MLflow")
            return got
        return wrapper

    for name in writes:
        _wrap(f"ablate.tracking.tracker:Tracker.{name}", tracked)
    _wrap("ablate.tracking.parent_run:ParentRun.finish", finish)


ARM = {"plan": _plan, "result": _result, "measurement": _measurement, "report": _report, "end": _end}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in POINTS or not argv[1].isdigit() or int(argv[1]) < 1 or "--" not in argv:
        print(f"usage: python -m benchmarks.chaos.kill_at {{{','.join(POINTS)}}} N -- ABLATE_ARGS...", file=sys.stderr)
        return 2
    point, n, args = argv[0], int(argv[1]), argv[argv.index("--") + 1:]
    try:
        ARM[point](_Counter(point, n))
    except (ImportError, AttributeError) as error:
        print(f"kill_at: cannot set up {point}: {error}", file=sys.stderr)
        return NOT_SET_UP
    from ablate.cli import main as ablate

    return ablate(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

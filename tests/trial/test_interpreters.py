"""Interpreters started ahead: stopped while a trial measures, ran only outside it, and none outlives the study."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.trial import interpreters
from ablate.trial.interpreters import Died, Interpreter, Interpreters, overlaps
from ablate.trial.metrics import TIMELINE
from ablate.trial.process import TrialSpec, run_in_fresh_process

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _spec() -> TrialSpec:
    study = studies.load(str(TINY), "cpu")
    return TrialSpec(study, tuple(opts[0] for _, opts in study.space), "cpu", train_for_accuracy=False)


def slow_preload() -> None:
    time.sleep(1.0)  # an import that takes a while, without torch's seconds


def busy_preload() -> None:
    """An import that needs two seconds of CPU: a stopped process gets none, so it ends only after it is continued.
    Long enough to be still running when the trial asks to measure: with half a second, on 2 cores, three of them
    and the trial starting at once, one finished first (a fresh-clone CI run)."""
    began = time.process_time()
    while time.process_time() - began < 2.0:
        pass


def asks_to_measure(spec: TrialSpec) -> dict:
    from ablate.trial import process

    asked = time.perf_counter()
    waited = process._channel.measuring()
    went = time.perf_counter()
    time.sleep(1.0)  # the measured stretch
    ended = time.perf_counter()
    process._channel.quiet()
    return {"asked": asked, "went": went, "ended": ended, "waited": waited}


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    return _state(pid) != "Z"


@pytest.mark.slow
def test_interpreters_importing_are_stopped_while_a_trial_measures_and_continued_after():
    with Interpreters(preload=busy_preload) as pool:
        metrics = run_in_fresh_process(_spec(), asks_to_measure, interpreters=pool)
        measured = [(metrics["went"], metrics["ended"])]
        ahead = list(pool.ahead)  # started for the next trials just before this one's launch, then stopped
        assert len(ahead) == 3
        pool.wait_all(None)
        for interpreter in ahead:
            (stopped, continued), *_ = interpreter.stops
            assert stopped <= metrics["went"] and continued >= metrics["ended"]
            assert interpreter.import_ended > metrics["ended"]  # its CPU seconds came after the stretch
        imports = metrics[TIMELINE]["imports"] + pool.drain_imports()
        assert len(imports) >= 1 + 3 and overlaps(imports, measured) == []


def test_the_time_an_interpreter_ran_is_its_import_less_its_stops():
    interpreter = Interpreter(process=None, conn=None, import_began=0.0, import_ended=10.0,
                              stops=[(2.0, 3.0), (5.0, 6.0), (11.0, None)])
    assert interpreter.ran() == [(0.0, 2.0), (3.0, 5.0), (6.0, 10.0)]


def test_overlaps_finds_an_import_that_shares_a_moment_with_a_measured_span():
    assert overlaps([(0.0, 1.0), (5.0, 6.0)], [(0.5, 2.0), (2.0, 5.0)]) == [((0.0, 1.0), (0.5, 2.0))]


@pytest.mark.slow
def test_a_prepared_interpreter_killed_while_waiting_is_replaced_and_close_leaves_none(tmp_path):
    with Interpreters(preload=slow_preload) as pool:
        pool.refill()
        started = [i.process.pid for i in pool.ahead]
        os.kill(started[0], signal.SIGKILL)
        metrics = run_in_fresh_process(_spec(), asks_to_measure, interpreters=pool)
        assert metrics["went"] >= metrics["asked"]
        started += [i.process.pid for i in pool.ahead]
    assert not any(_alive(pid) for pid in started)


def holds_its_tongue(conn) -> None:
    time.sleep(60)  # holding its end of the pipe open, saying nothing


def _silent() -> Interpreter:
    """An interpreter whose process starts and never says a word (a stuck start: the machine swapping, say)."""
    ctx = interpreters._context()
    parent_end, child_end = ctx.Pipe(duplex=True)
    process = ctx.Process(target=holds_its_tongue, args=(child_end,))
    process.start()
    child_end.close()
    return Interpreter(process, parent_end, time.perf_counter())


def test_an_interpreter_that_never_says_armed_is_stopped_not_waited_on_for_ever(monkeypatch):
    monkeypatch.setattr(interpreters, "ARM_S", 0.5)
    with pytest.raises(Died, match="did not start within"):
        _silent().pause()
    stuck = _silent()
    pool = Interpreters(preload=slow_preload, ahead=[stuck])
    pool.pause()  # the trial asking to measure goes on without it
    assert pool.ahead == [] and not _alive(stuck.process.pid)


@pytest.mark.slow
@pytest.mark.parametrize("stopped", [False, True], ids=["waiting", "stopped while importing"])
def test_prepared_interpreters_exit_when_the_study_process_is_killed(stopped):
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from ablate.trial.interpreters import Interpreters\n"
        "from test_interpreters import slow_preload\n"
        "pool = Interpreters(preload=slow_preload)\n"
        "pool.refill()\n"
        f"{'pool.pause()' if stopped else 'pool.wait_all(None)'}\n"
        "print(' '.join(str(i.process.pid) for i in pool.ahead), flush=True)\n"
        "time.sleep(600)\n")
    study = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in study.stdout.readline().split()]
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    if stopped:  # SIGSTOPped: end-of-file cannot wake them; the kernel kills them with the study (PDEATHSIG)
        assert all(_state(p) == "T" for p in pids)
    study.kill()  # SIGKILL: no cleanup code runs; the interpreters read end-of-file on their pipes
    study.wait()
    deadline = time.monotonic() + 60  # a liveness bound, not a timing claim
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)



def no_preload() -> None:
    pass


def leaves_a_child_and_an_exit_handler(spec: TrialSpec) -> dict:
    """A trial that leaves what a training loop may: a child process (a DataLoader worker), and work for the
    interpreter's finalization (torch's takes about 0.8 s), here an exit handler that leaves a file."""
    import atexit
    import multiprocessing

    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
    child.start()
    atexit.register(Path(os.environ["ABLATE_TEST_FINALIZED"]).touch)
    return {"child": child.pid}


def test_an_interpreter_exits_without_finalizing_once_its_result_is_sent_and_ends_its_children(tmp_path, monkeypatch):
    finalized = tmp_path / "finalized"
    monkeypatch.setenv("ABLATE_TEST_FINALIZED", str(finalized))
    with Interpreters(preload=no_preload) as pool:
        metrics = run_in_fresh_process(_spec(), leaves_a_child_and_an_exit_handler, interpreters=pool)
    assert not finalized.exists()  # the study did not wait for finalization: it was skipped
    assert not _alive(metrics["child"])


def imports_of(libraries: tuple[str, ...] = ()) -> None:
    """A preload that imports only the study's `libraries`."""
    import importlib

    for name in libraries:
        importlib.import_module(name)


def imported_before_the_trial(spec: TrialSpec) -> dict:
    return {"imported": int("tests_library_stub" in sys.modules)}


def test_the_models_library_is_imported_ahead_where_the_study_names_one(tmp_path, monkeypatch):
    (tmp_path / "tests_library_stub.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))  # a spawned interpreter starts from the study's sys.path
    for libraries, imported in ((("tests_library_stub",), 1), ((), 0)):
        with Interpreters(preload=imports_of, libraries=libraries) as pool:
            assert run_in_fresh_process(_spec(), imported_before_the_trial, interpreters=pool)["imported"] == imported


def test_a_missing_library_is_left_to_the_trial_to_report():
    interpreters._preload(("tests_no_such_library",))  # no ImportError: the trial's build says it in its words

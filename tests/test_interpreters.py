"""Interpreters started ahead: a measured stretch waits for every import, and none outlives the study."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ablate import study as studies
from ablate.interpreters import Interpreters, overlaps
from ablate.trial import TIMELINE, TrialSpec, run_in_fresh_process

TINY = Path(__file__).resolve().parent / "studies" / "tiny.yaml"


def _spec() -> TrialSpec:
    study = studies.load(str(TINY), "cpu")
    return TrialSpec(study, tuple(opts[0] for _, opts in study.space), "cpu", train_for_accuracy=False)


def slow_preload() -> None:
    time.sleep(1.0)  # an import that takes a while, without torch's seconds


def asks_to_measure(spec: TrialSpec) -> dict:
    from ablate import trial

    asked = time.perf_counter()
    waited = trial._measuring()
    return {"asked": asked, "went": time.perf_counter(), "waited": waited}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_measured_stretch_begins_only_when_every_interpreter_ahead_has_imported():
    with Interpreters(preload=slow_preload) as pool:
        metrics = run_in_fresh_process(_spec(), asks_to_measure, interpreters=pool)
        imports = metrics[TIMELINE]["imports"]
        # The trial's own interpreter, and those started for the next trials while it started up.
        assert len(imports) == 1 + 3
        assert all(ended <= metrics["went"] for _, ended in imports)
        assert metrics["waited"] > 0 and any(ended > metrics["asked"] for _, ended in imports)
        assert overlaps(imports, [(metrics["went"], time.perf_counter())]) == []


def test_overlaps_finds_an_import_that_shares_a_moment_with_a_measured_span():
    assert overlaps([(0.0, 1.0), (5.0, 6.0)], [(0.5, 2.0), (2.0, 5.0)]) == [((0.0, 1.0), (0.5, 2.0))]


def test_a_prepared_interpreter_killed_while_waiting_is_replaced_and_close_leaves_none(tmp_path):
    with Interpreters(preload=slow_preload) as pool:
        pool.refill()
        started = [i.process.pid for i in pool.ahead]
        os.kill(started[0], signal.SIGKILL)
        metrics = run_in_fresh_process(_spec(), asks_to_measure, interpreters=pool)
        assert metrics["went"] >= metrics["asked"]
        started += [i.process.pid for i in pool.ahead]
    assert not any(_alive(pid) for pid in started)


def test_prepared_interpreters_exit_when_the_study_process_is_killed():
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from ablate.interpreters import Interpreters\n"
        "from test_interpreters import slow_preload\n"
        "pool = Interpreters(preload=slow_preload)\n"
        "pool.refill()\n"
        "pool.quiet(None)\n"
        "print(' '.join(str(i.process.pid) for i in pool.ahead), flush=True)\n"
        "time.sleep(600)\n")
    study = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in study.stdout.readline().split()]
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    study.kill()  # SIGKILL: no cleanup code runs; the interpreters read end-of-file on their pipes
    study.wait()
    deadline = time.monotonic() + 60  # a liveness bound, not a timing claim
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)

"""One `ablate run` per study: a second one refuses with one line and exit status 2; a killed run leaves no lock.

Real processes: the first `ablate run` runs in a subprocess and is killed with SIGKILL.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from messages import one_message

from ablate.cli import main
from ablate.store.lock import LOCK_FILE, Busy, study_lock

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _wait_for_holder(lock: Path, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if lock.exists() and lock.read_text().startswith(f"process {process.pid} "):
            return
        time.sleep(0.1)
    process.kill()
    pytest.fail(f"the first run never took the lock (exit status {process.poll()})")


@pytest.mark.slow
def test_a_second_run_of_the_same_study_refuses_and_a_killed_run_leaves_no_lock(mnist, tmp_path, capsys):
    results = tmp_path / "results"
    first = subprocess.Popen([sys.executable, "-m", "ablate", "run", str(TINY), "--device", "cpu",
                              "--results", str(results)], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lock = results / "tiny" / LOCK_FILE
    try:
        _wait_for_holder(lock, first)
        assert main(["run", str(TINY), "--device", "cpu", "--results", str(results)]) == 2
        err = capsys.readouterr().err
        said = one_message(err)  # one message, wrapped at 100 columns
        assert "Traceback" not in err
        assert f"study tiny is already running (process {first.pid} since " in said and "wait" in said
        assert "server database" in said
        assert lock.read_text().startswith(f"process {first.pid} ")  # the holder's note is untouched
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    with study_lock(results / "tiny", "tiny"):  # the kernel released the dead holder's lock: nothing stale
        assert lock.read_text().startswith(f"process {os.getpid()} ")


def _hold(folder: Path) -> subprocess.Popen:
    """A process that holds the study lock on `folder` until killed."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from ablate.store.lock import study_lock\n"
                               "with study_lock(Path(sys.argv[1]), 'tiny'):\n"
                               "    print('held', flush=True); time.sleep(120)",
                               str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_refused_run_writes_nothing(mnist, tmp_path, capsys):
    results = tmp_path / "results"
    holder = _hold(results / "tiny")
    try:
        note = (results / "tiny" / LOCK_FILE).read_text()
        assert main(["run", str(TINY), "--device", "cpu", "--results", str(results)]) == 2
        assert f"(process {holder.pid} since " in capsys.readouterr().err
        assert sorted(p.relative_to(results) for p in results.rglob("*")) == [Path("tiny"), Path("tiny") / LOCK_FILE]
        assert (results / "tiny" / LOCK_FILE).read_text() == note
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_is_held_across_processes_and_released_when_the_holder_dies(tmp_path):
    holder = _hold(tmp_path)
    try:
        with pytest.raises(Busy, match=f"process {holder.pid} since "):
            with study_lock(tmp_path, "tiny"):
                pass
    finally:
        holder.kill()  # SIGKILL: no chance to clean up
        holder.wait()
    with study_lock(tmp_path, "tiny"):
        with pytest.raises(Busy):  # a second open of the lock in the same process is refused too
            with study_lock(tmp_path, "tiny"):
                pass
    with study_lock(tmp_path, "tiny"):  # released on leaving the block
        pass

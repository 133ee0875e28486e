"""The foreign-load reading: the machine's CPU time minus the measurement's own process tree."""
from __future__ import annotations

import os
import resource
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from ablate.trial import foreign_load
from benchmarks import busy

linux_only = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads /proc (Linux)")


def _fake_proc(root: Path, machine: tuple[int, ...], processes: dict[int, tuple[int, int, int, int]]) -> Path:
    """A /proc with the machine's cpu line and, per pid, (ppid, utime+stime, cutime+cstime, unused)."""
    root.mkdir(exist_ok=True)
    (root / "stat").write_text("cpu  " + " ".join(map(str, machine)) + "\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
    for pid, (ppid, own, reaped, _) in processes.items():
        (root / str(pid)).mkdir(exist_ok=True)
        # A command name with a space and a parenthesis, as /proc allows.
        fields = ["S", ppid, 1, 1, 0, -1, 0, 0, 0, 0, 0, own, 0, reaped, 0, 20, 0, 1, 0]
        (root / str(pid) / "stat").write_text(f"{pid} (py thon) x) " + " ".join(map(str, fields)))
    (root / "self").mkdir(exist_ok=True)  # not a pid: skipped
    return root


def test_foreign_cores_are_the_machines_busy_time_less_the_tree_and_steal_counts_as_foreign(tmp_path: Path) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    # Tree: 10 (root) -> 11 (worker) -> 12 (its helper); 20 is a stranger; 11 already reaped a child (cutime).
    before = foreign_load.snapshot(0.0, _fake_proc(tmp_path / "a", (100, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                                          {10: (1, 10, 0, 0), 11: (10, 10, 0, 0), 12: (11, 0, 0, 0),
                                           20: (1, 0, 0, 0)}), pid=10)
    # Over 2 s: the tree ran 2 cores' worth, the stranger 1 core's, the hypervisor stole 0.5 core's.
    after = foreign_load.snapshot(2.0, _fake_proc(tmp_path / "b", (100 + 6 * tick, 0, 0, 0, 0, 0, 0, tick, 0, 0),
                                         {10: (1, 10 + 2 * tick, 0, 0), 11: (10, 10, tick, 0),
                                          12: (11, tick, 0, 0), 20: (1, 2 * tick, 0, 0)}), pid=10)
    got = foreign_load.between(before, after)
    assert got is not None
    assert got.steal_cores == pytest.approx(0.5)
    assert got.foreign_cores == pytest.approx(1.0 + 0.5)  # (6 - 4) ticks-seconds / 2 s, plus steal


def test_no_reading_where_proc_cannot_say(tmp_path: Path) -> None:
    assert foreign_load.snapshot(0.0, tmp_path / "missing") is None
    assert foreign_load.between(None, foreign_load.Snapshot(1.0, 0.0, 0.0, 0.0)) is None


@linux_only
def test_a_busy_stranger_is_foreign_and_a_busy_child_is_not() -> None:
    seconds = 1.5
    # The child is part of the measurement's tree; the orphan (its parent shell exits at once) is not.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = subprocess.Popen(busy.command(seconds))
    start = foreign_load.snapshot(time.perf_counter())
    child.wait()
    end = foreign_load.snapshot(time.perf_counter())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert start is not None and end is not None
    # The child's CPU time counts as the tree's own, whatever share of a core a busy machine gave it (a few clock
    # ticks of slack: the child's start-up before the first snapshot, and /proc's resolution).
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert used > 0.1 and end.own_s - start.own_s >= used - 0.05, (used, end.own_s - start.own_s)

    subprocess.run(["sh", "-c", f"{shlex.join(busy.command(seconds))} >/dev/null 2>&1 &"], check=True)
    start = foreign_load.snapshot(time.perf_counter())
    time.sleep(seconds * 0.8)
    got = foreign_load.between(start, foreign_load.snapshot(time.perf_counter()))
    assert got is not None and got.foreign_cores >= 0.5


@linux_only
def test_waiting_for_a_quiet_machine_stops_at_the_first_quiet_probe_or_at_its_limit() -> None:
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s
    clock = lambda: now[0]  # noqa: E731 - a fake clock the fake sleep advances
    assert foreign_load.wait_until_quiet(limit=1e9, most_s=60.0, sleep=sleep, clock=clock)  # quiet: one probe
    assert now[0] == 1.0
    assert not foreign_load.wait_until_quiet(limit=-1.0, most_s=5.0, sleep=sleep, clock=clock)
    assert now[0] == 6.0  # never quiet: the limit
    disturbed, Load = foreign_load.disturbed, foreign_load.Load
    assert not disturbed(None, 0.25) and not disturbed(Load(3.0, 0.0), None)
    assert disturbed(Load(0.3, 0.0), 0.25) and not disturbed(Load(0.2, 0.0), 0.25)

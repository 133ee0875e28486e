"""Foreign load: how much of the machine something other than the measurement used while it was timed.

A timed window sees only its own clock. A neighbour that wakes up for a minute
(another job, a browser, an indexer, the other tenants of a shared VM) slows
the measurement without it knowing, and a speed-up read from that one process
is wrong by however much the neighbour took: an interval from the noise model
cannot see it. So the trial reads, at the first window's start and the last
window's end, the CPU time of the whole machine (`/proc/stat`: every core, the
hypervisor's steal included) and of its own process tree (itself and every
descendant - DataLoader workers, compile workers - from `/proc/<pid>/stat`),
and reports the difference as *foreign cores*: the average number of cores
busy with something else during the windows. Steal (time the hypervisor gave
to other guests) is foreign by definition and is also reported on its own.

Linux only; elsewhere `snapshot` returns None and nothing is claimed. The
resolution is the kernel's clock tick (10 ms on most kernels) per core, so
nothing is read over windows shorter than a second together (`MIN_SECONDS`). A trial's
interpreter imports this module, so it uses the standard library only.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

_PROC = Path("/proc")
# The shortest stretch read: /proc counts in the kernel's clock ticks (10 ms on most kernels) per core, so over
# 0.1 s one stray tick reads as 0.1 cores. Shorter timed windows (a test's tiny study) are not judged at all.
MIN_SECONDS = 1.0


@dataclass(frozen=True)
class Snapshot:
    """CPU seconds so far: the machine's busy time, its steal, and this process tree's own."""

    wall: float  # time.perf_counter() when it was taken
    busy_s: float  # every core: user, nice, system, irq, softirq (guest time is inside user)
    steal_s: float
    own_s: float  # this process and its descendants, reaped children included


@dataclass(frozen=True)
class Load:
    """Cores' worth of foreign work during a stretch: others' processes plus the hypervisor's steal."""

    foreign_cores: float  # steal included
    steal_cores: float


def snapshot(wall: float, proc: Path = _PROC, pid: int | None = None) -> Snapshot | None:
    """The machine's and this process tree's CPU time now; None where /proc cannot say (not Linux)."""
    try:
        fields = (proc / "stat").read_text().split("\n", 1)[0].split()
        tick = float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    own = _tree_ticks(proc, os.getpid() if pid is None else pid)
    return Snapshot(wall, (user + nice + system + irq + softirq) / tick, steal / tick, own / tick)


def between(before: Snapshot | None, after: Snapshot | None) -> Load | None:
    """The foreign load from `before` to `after`, in cores; None when either could not be read, or when the stretch
    is shorter than `MIN_SECONDS`, too short for the kernel's tick to say."""
    if before is None or after is None or after.wall - before.wall < MIN_SECONDS:
        return None
    wall = after.wall - before.wall
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    steal = max(0.0, after.steal_s - before.steal_s)
    # Tick rounding can leave a busy tree's own time a tick above the machine's: never below zero.
    return Load(foreign_cores=max(0.0, others) / wall + steal / wall, steal_cores=steal / wall)


def _tree_ticks(proc: Path, root: int) -> int:
    """CPU ticks of `root` and its live descendants, each with the children it has already reaped."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # it exited while we looked
            continue
        # The command name is in parentheses and may hold spaces: the fields start after the last ')'.
        rest = text[text.rfind(")") + 2:].split()
        if len(rest) < 15:
            continue
        pid = int(entry.name)
        parents[pid] = int(rest[1])
        ticks[pid] = sum(int(v) for v in rest[11:15])  # utime, stime, cutime, cstime
    tree, frontier = {root}, [root]
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(ticks.get(pid, 0) for pid in tree)


def too_busy(cores: float | None, limit: float | None) -> bool:
    """Whether `cores` of other work exceed `limit` (never, where the load was not read or there is no limit)."""
    return limit is not None and cores is not None and cores > limit


def disturbed(load: Load | None, limit: float | None) -> bool:
    """Whether other work used more than `limit` cores on average (never, where the load could not be read)."""
    return too_busy(load.foreign_cores if load else None, limit)


def wait_until_quiet(limit: float, most_s: float, probe_s: float = 1.0,
                     sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.perf_counter) -> bool:
    """Wait, at most `most_s`, until a `probe_s` stretch sees at most `limit` foreign cores; whether one did.

    Before a measurement is taken again: a neighbour busy for a minute would
    disturb an immediate repeat too. The probing process's own tree (the study,
    its prepared interpreters) is not foreign; anything else is.
    """
    began = clock()
    while clock() - began < most_s:
        before = snapshot(clock())
        sleep(probe_s)
        if not disturbed(between(before, snapshot(clock())), limit):
            return True
    return False

"""`ablate run --workers N`: N `ablate worker` processes on this machine sharing one server database.

Each worker is a process of its own, started as a user would start one on another machine, so that one machine's
workers and many machines' workers are the same thing: the storage hands each queued measurement to one worker
(`ablate.run.runner`). Worker i runs on cuda:i; CPU workers share the cores, which is for trying the set-up, not
for measuring. Each worker has its own session, so that a Ctrl-C or SIGTERM reaches it once, forwarded from here,
never twice.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ablate.run.interrupts import sigterm_as_keyboard_interrupt
from ablate.run.objective import SHARED_CPU_ENV

if TYPE_CHECKING:
    import torch


def run_workers(shown: str, n: int, device: torch.device, storage: str, results: Path,
                design: Sequence[str] = ()) -> int:
    """Run `ablate worker` `n` times at once on this machine and wait for all: their worst exit status, 0 when
    all finished (the caller's runner then finds every combination done). `shown`: the study as the user named
    it, which each worker reads again; `design`: its design options (`--quick`, `--single-pass`), passed on."""
    if device.type == "cpu":
        print(f"ablate: warning: {n} workers share this machine's CPU cores, so each one's throughput is measured "
              "while the others compete with it; use several CPU workers to try the set-up, one worker per GPU to "
              "measure", file=sys.stderr)
    devices = [f"cuda:{i}" if device.type == "cuda" else "cpu" for i in range(n)]
    # CPU workers load each other on purpose: the load guard must not measure again for it (ablate.trial.foreign_load).
    env = {**os.environ, SHARED_CPU_ENV: "1"} if device.type == "cpu" else None
    started = [subprocess.Popen([sys.executable, "-m", "ablate", "worker", shown, "--storage", storage,
                                 "--device", d, "--results", str(results), "--no-summary",
                                 *design],
                                start_new_session=True, env=env) for d in devices]
    try:
        with sigterm_as_keyboard_interrupt():
            return max((p.wait() for p in started), key=abs)
    except KeyboardInterrupt:  # each worker stops as on SIGTERM: its trial KILLED and queued again
        for p in started:
            if p.poll() is None:
                p.terminate()
        for p in started:
            p.wait()
        print("ablate: interrupted; the workers marked their running trials KILLED; run the same command again "
              "to resume", file=sys.stderr)
        return 130

"""The wall time of a full study grid, run exactly as a user runs it (`ablate run STUDY`) in a subprocess.

The results go to a folder of their own (a resumed study would not be a full
grid), and the inductor cache to a fresh temporary folder, so compilation is
timed cold, as on a new machine.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GridRun:
    wall_s: float
    output: str
    results: Path
    report: Path


def run(study: str, results: Path, device: str, extra: tuple[str, ...] = ()) -> GridRun:
    """`extra`: more `ablate run` options, e.g. ("--single-pass",) for the design before blocks."""
    if results.exists():
        shutil.rmtree(results)
    with tempfile.TemporaryDirectory(prefix="ablate-inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "ablate", "run", study, "--device", device,
                               "--results", str(results), "--full-table", *extra],
                              env=env, stdout=subprocess.PIPE, text=True)  # progress (stderr) stays visible
        wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"ablate run {study} failed (exit {done.returncode}); its output is above")
    return GridRun(wall, done.stdout, results, results / study / "report" / "grid" / "report.md")

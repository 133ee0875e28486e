"""A neighbour's load: a process that keeps one core busy for a while, outside whatever it is started beside.

The load guard (ablate/trial/foreign_load.py) must see such work as foreign: the reproducibility benchmark starts a
burst of them during a run, and tests/trial/test_foreign_load.py starts one as a measurement's child and one as a
stranger.
"""
from __future__ import annotations

import sys

SCRIPT = "import time\nend = time.perf_counter() + {s}\nwhile time.perf_counter() < end: pass\n"


def command(seconds: float) -> list[str]:
    """The command line of a process that spins on one core for `seconds` (wall clock), then exits."""
    return [sys.executable, "-c", SCRIPT.format(s=seconds)]

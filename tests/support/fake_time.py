"""A stand-in for the `time` module inside ablate.trial.measure: time moves only when a test says so."""
from __future__ import annotations


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

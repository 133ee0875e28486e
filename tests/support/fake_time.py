"""A stand-in for the `time` module inside ablate.trial.measure: time moves only when a test says so."""
from __future__ import annotations


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def installed(monkeypatch) -> FakeTime:
    """A FakeTime as ablate.trial.measure's clock, the machine's real load left out of its readings (a load snapshot
    reads the real clock and CPU counters, not the fake's)."""
    from ablate.trial import measure

    fake = FakeTime()
    monkeypatch.setattr(measure, "time", fake)
    monkeypatch.setattr(measure.foreign_load, "snapshot", lambda wall: None)
    return fake

"""benchmarks.boundary_cost: a profiled step's bookkeeping, timed on the window a trial uses."""
from __future__ import annotations

from benchmarks import boundary_cost


def test_it_times_each_repeat_per_step_and_says_the_median(capsys):
    found = boundary_cost.per_step(steps=200, repeats=3)
    assert len(found) == 3 and all(isinstance(s, float) for s in found)
    assert boundary_cost.main(["--steps", "200", "--repeats", "3"]) == 0
    assert "us a step" in capsys.readouterr().out

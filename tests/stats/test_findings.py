"""The study-wide findings every surface renders (`ablate.stats.answer.findings`)."""
from __future__ import annotations

from ablate.stats.answer.costs import BreakEven
from ablate.stats.answer.findings import OneOffCost, _one_off


def _break(technique: str, extra_s: float, steps: float | None) -> BreakEven:
    return BreakEven(None, None, technique, extra_s, 0.01, steps, 0.0, 0.0, measured=True)  # type: ignore[arg-type]


def test_each_techniques_one_off_cost_is_its_middle_figure_the_upper_of_two_and_only_the_faster_ones_break_even():
    found = _one_off([_break("compile", 12.0, 300.0), _break("torchscript", 1.0, None),
                      _break("compile", 10.0, None), _break("compile", 30.0, 100.0), _break("compile", 20.0, 200.0)])
    assert found == (OneOffCost("compile", 20.0, 4, 3, 200.0), OneOffCost("torchscript", 1.0, 1, 0, None))

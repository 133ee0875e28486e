"""The line each finished measurement prints above the progress bar (`ablate.run.objective.ProgressLines`)."""
from __future__ import annotations

from typing import Any

import optuna

from ablate.run.objective import ProgressLines
from ablate.store import records


def _record(number: int, **attrs: Any) -> records.Record:
    trial = optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, values=[668.0, 0.0],
                                      user_attrs={"block": 0, "position": 1, "phase": "screen", "state": "complete",
                                                  "combination": "baseline", **attrs})
    trial.number = number
    return records.from_trial(trial)


def test_a_measurement_that_timed_windows_only_says_so_not_that_accuracy_is_missing():
    """Under the whole table every row gets its group's accuracy after the race: a screening or race measurement
    is throughput only, and its line says that rather than "accuracy not measured"."""
    line = ProgressLines("samples").line(_record(6, metrics={"throughput": 668.4}))
    assert line == "#6 block 0 baseline: complete: 668 samples/s, throughput only"


def test_a_training_says_its_accuracy_and_a_borrowed_one_where_it_came_from():
    lines = ProgressLines("samples")
    trained = _record(7, metrics={"throughput": 668.0, "test_accuracy": 98.714}, accuracy_trained=True)
    borrowed = _record(9, metrics={"throughput": 700.0, "test_accuracy": 98.714}, accuracy_from=7)
    assert lines.line(trained) == "#7 block 0 baseline: complete: 668 samples/s, test acc 98.71% (trained)"
    assert lines.line(borrowed) == "#9 block 0 baseline: complete: 700 samples/s, test acc 98.71% (from #7)"

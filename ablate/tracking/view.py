"""What the MLflow UI opens on: a study's experiment as a table that answers "which combination is fastest, and
what does it cost in accuracy", through MLflow's own mechanisms (looked up in the UI shipped with mlflow 3.17):

- ``mlflow.experimentKind`` (an experiment tag, what the UI's experiment-type selector writes):
  ``custom_model_development``, the model-training view, not the GenAI one. The 3.17 UI takes the view from
  its ``workflowType`` instead (a URL parameter, else the browser's last choice), so the URL carries it too.
- ``mlflow.sharedViewState.KEY`` (an experiment tag, what the UI's *Share* button writes) holds a view: its
  search filter, sort and columns; ``viewStateShareKey=KEY`` in the URL opens it. Plain JSON is accepted.
- One run per combination carries ``ablate.row = combination`` (its primary measurement): the view filters on
  it, so each combination is one row, not one per measurement.
- Its columns: the speed-up, the group's ``test_accuracy`` (a metric column: one click sorts the grid by
  accuracy; ``test_loss`` for a task without accuracy, none where the study trains nothing), the accuracy change,
  the parity verdict and the state, then the dimensions. Its parallel-coordinates chart plots the dimensions, that
  metric and the speed-up (coloured by the last axis: the speed-up); the UI draws only the runs that carry every
  plotted metric.
- ``parity_verdict`` (a metric beside the ``parity`` tag, on every measurement of a combination with a verdict):
  1 ok, 0 uncertain, -0.5 uncertain and probably below, -1 below. Sorting on it puts the safe combinations first;
  ``metrics.parity_verdict >= 0`` keeps those the race could recommend, ``= 1`` those passed ``ok``.
- Display tags: the speed-up with its interval, the accuracy change, the parity verdict and the energy per sample
  over the baseline's (``not counted here`` where nothing on the device counted energy) as short strings
  (``x1.07 [0.98, 1.17]``), so the table reads at a glance. The metrics keep full precision: they are the
  data (sorting, charts, scripts), the tags only their rounding.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ablate.config.study import Study
from ablate.render.results import NOT_COUNTED
from ablate.stats.answer.comparison import Comparison, DeviceComparisons
from ablate.stats.parity import BELOW, OK, UNCERTAIN, Parity
from ablate.store.records import ACCURACY_FROM_TAG, held_out, trained_figures
from ablate.trial.metrics import TEST_ACCURACY, TEST_LOSS
from ablate.words import count, factor, interval

EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
SHARE_KEY = "ablate"
SHARE_TAG = f"mlflow.sharedViewState.{SHARE_KEY}"
ROW_TAG, ROW = "ablate.row", "combination"
SPEEDUP, ACCURACY, PARITY, STATE = "speed-up", "accuracy change", "parity", "ablate.state"
ENERGY = "energy per sample"  # a display tag only, not one of the view's columns
DIMENSION = "dim."  # a dimension's param; strategies' own settings are "strategy.NAME.SETTING": sorted after
SETTING = "strategy."
UI_PORT = 5000
RUN_NAME = "mlflow.runName"  # mlflow.utils.mlflow_tags.MLFLOW_RUN_NAME: a run's name, settable as a tag
PARITY_METRIC = "parity_verdict"
# Ordered by how safe the accuracy is; a probably-below `uncertain` sorts under zero, as the race treats it.
PARITY_CODE = {OK: 1.0, UNCERTAIN: 0.0, BELOW: -1.0}
PROBABLY_BELOW_CODE = -0.5


def _column(kind: str, key: str) -> str:
    """A column's key as the runs table names it (its canonical sort key)."""
    return f"{kind}.`{key}`"


def quality_metric(study: Study) -> str | None:
    """The held-out figure the view shows beside the speed-up: the test accuracy, a loss-only task's test loss, none
    where the study trains nothing."""
    if study.budget.throughput_only:
        return None
    return TEST_ACCURACY if study.task.has_accuracy else TEST_LOSS


def shared_state(dimensions: Iterable[str], quality: str | None) -> dict[str, Any]:
    """The view: one row per combination, fastest first, the answer's columns, then the study's dimensions. `quality`:
    the held-out metric (`quality_metric`) shown as a column and charted against the speed-up."""
    dimensions = list(dimensions)
    answer = [_column("tags", SPEEDUP), *([_column("metrics", quality)] if quality else []),
              *(_column("tags", key) for key in (ACCURACY, PARITY, STATE))]
    columns = answer + [_column("params", DIMENSION + d) for d in dimensions]
    name = _column("attributes", "Run Name")
    return {
        "searchFilter": f"tags.`{ROW_TAG}` = '{ROW}'",
        "orderByKey": _column("metrics", "speedup"),
        "orderByAsc": False,
        "selectedColumns": columns,
        # The table groups columns by kind (params before tags) unless told their order: the answer first.
        "columnOrder": [name, *columns],
        "columnWidths": {name: 300, _column("tags", SPEEDUP): 150, _column("tags", ACCURACY): 130,
                         _column("tags", PARITY): 150},
        "runsHiddenMode": "SHOW_ALL",  # the charts compare every combination, not the UI's default first 10
        "compareRunCharts": _charts(dimensions, quality),
        "compareRunSections": [{"uuid": SECTION, "name": "ablate: the answer", "display": True, "isReordered": False,
                                "deleted": False, "isGenerated": False}],
    }


SECTION = "ablate-answer"


def _charts(dimensions: list[str], quality: str | None) -> list[dict[str, Any]]:
    """The chart view (`compareRunsMode=CHART`): the study's dimensions against the held-out metric and the speed-up
    (parallel coordinates, coloured by the last axis), the speed-up of each combination, and speed-up against
    accuracy change: chart configurations as the UI stores them."""
    common = {"metricSectionId": SECTION, "deleted": False, "isGenerated": False, "runsCountToCompare": 100}
    return [
        {**common, "uuid": "ablate-parallel", "type": "PARALLEL", "selectedParams": [DIMENSION + d for d in dimensions],
         "selectedMetrics": [*([quality] if quality else []), "speedup"], "showAllRuns": True},
        {**common, "uuid": "ablate-speedup", "type": "BAR", "metricKey": "speedup"},
        {**common, "uuid": "ablate-tradeoff", "type": "SCATTER", "xaxis": {"key": "speedup", "type": "METRIC"},
         "yaxis": {"key": "accuracy_change", "type": "METRIC"}},
    ]


def experiment_tags(dimensions: Iterable[str], quality: str | None) -> dict[str, str]:
    return {**EXPERIMENT_KIND, SHARE_TAG: json.dumps(shared_state(dimensions, quality))}


def url(tracking_uri: str, experiment_id: str, charts: bool = False, port: int = UI_PORT) -> str:
    """The view's address: on the tracking server itself, or on `ablate ui --port port`'s (a database has no UI
    of its own). `charts`: its chart view (the runs compared in `_charts`) rather than its table."""
    return (f"{_base(tracking_uri, port)}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
            f"&viewStateShareKey={SHARE_KEY}" + ("&compareRunsMode=CHART" if charts else ""))


def compare_url(tracking_uri: str, runs: Sequence[str], experiments: Sequence[str], port: int = UI_PORT) -> str:
    """MLflow's compare-runs page on `runs` (of `experiments`), written as MLflow's own UI links to it (JSON lists,
    the experiments sorted and once each)."""
    listed = json.dumps(list(runs), separators=(",", ":"))
    of = json.dumps(sorted(set(experiments)), separators=(",", ":"))
    return f"{_base(tracking_uri, port)}/#/compare-runs?runs={listed}&experiments={of}"


def served(tracking_uri: str) -> bool:
    """Whether `tracking_uri` is an MLflow tracking server (http), which serves its own UI and keeps its own
    artifacts, rather than a database file or folder on this machine."""
    return tracking_uri.startswith(("http://", "https://"))


def _base(tracking_uri: str, port: int) -> str:
    """The UI's root: the tracking server itself, or `ablate ui --port port`'s (a database has no UI of its own)."""
    return tracking_uri.rstrip("/") if served(tracking_uri) else f"http://127.0.0.1:{port}"


def metrics(c: Comparison) -> dict[str, float]:
    """A combination's comparisons with the baseline, as MLflow metrics (those that could be computed)."""
    i, p, e = c.interval, c.parity, c.energy_interval
    found = {"speedup": c.point, "speedup_low": i.low if i else None, "speedup_high": i.high if i else None,
             "speedup_blocks": c.blocks, "accuracy_change": c.accuracy_change,
             "accuracy_change_low": p.low if p else None, "accuracy_change_high": p.high if p else None,
             "energy_ratio": c.energy_ratio, "energy_ratio_low": e.low if e else None,
             "energy_ratio_high": e.high if e else None, PARITY_METRIC: parity_code(p) if p else None}
    return {k: float(v) for k, v in found.items() if v is not None}


def parity_code(p: Parity) -> float:
    """The verdict as a number to sort and filter on (`PARITY_CODE`)."""
    return PROBABLY_BELOW_CODE if p.probably_below else PARITY_CODE[p.verdict]


def display_tags(c: Comparison, counted: bool) -> dict[str, str]:
    """A combination's comparisons as the view's strings (two decimals: the interval is wider than that); `counted`:
    some measurement on its device counted energy (else its energy tag says it was not counted)."""
    tags = {}
    if c.point is not None:
        i = c.interval
        tags[SPEEDUP] = factor(c.point, i.low if i else None, i.high if i else None)
    if c.accuracy_change is not None:
        p = c.parity
        tags[ACCURACY] = f"{c.accuracy_change:+.2f} pts"
        tags[PARITY] = (f"{p.label} {interval(p.low, p.high, signed=True)} ({count(p.seeds, 'seed')})" if p
                        else "no verdict")
    elif c.unmeasured:
        tags[PARITY] = c.unmeasured
    if not counted:
        tags[ENERGY] = NOT_COUNTED
    elif c.energy_ratio is not None:
        e = c.energy_interval
        tags[ENERGY] = factor(c.energy_ratio, e.low if e else None, e.high if e else None)
    return tags


@dataclass(frozen=True)
class Row:
    """What every measurement of one combination gets at the end: its pooled comparisons, as metrics (full
    precision) and display tags; `primary` is the measurement that stands for the combination in the view."""

    combination: str
    metrics: dict[str, float]
    tags: dict[str, str]
    primary: int
    held_out: dict[str, float]  # its group's test accuracy and loss, for measurements taken before the group trained
    accuracy_from: int | None  # the trial that trained them

    def lent(self, measured: Mapping[str, float]) -> tuple[dict[str, float], dict[str, str]]:
        """The group's held-out figures and where they came from, for a complete measurement whose own metrics are
        `measured`, where it has none of its own (a raced grid trains a group after screening it:
        `Planner.defer_accuracy`); nothing otherwise."""
        if trained_figures(measured) or not self.held_out:
            return {}, {}
        return dict(self.held_out), ({ACCURACY_FROM_TAG: str(self.accuracy_from)}
                                     if self.accuracy_from is not None else {})

    def tags_for(self, number: int) -> dict[str, str]:
        """Its tags for measurement `number`; the primary is renamed after its combination alone (the row's name).
        The row tag is set on every measurement, so a primary that changed on resume leaves no second row."""
        if number != self.primary:
            return {**self.tags, ROW_TAG: "measurement"}
        return {**self.tags, ROW_TAG: ROW, RUN_NAME: self.combination}


def rows(compared: list[DeviceComparisons]) -> dict[tuple[str, str], Row]:
    """(device, combination) -> its Row, rendered from its comparison."""
    return {(c.device, c.combination): Row(c.combination, metrics(c), display_tags(c, d.energy_counted),
                                           c.record.number, held_out(c.record.metrics), c.record.accuracy_from)
            for d in compared for c in d.rows}

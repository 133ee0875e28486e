"""`ablate compare` in MLflow: a run of its own linking the two studies' parent runs, and the address of MLflow's
compare-runs page on them.

Why a run of its own: each study is a parent run with its measurements as children (`ablate.tracking.tracker`),
and a change is between two of them. Its run (experiment `ablate-changes/STUDY`; not `ablate/...`, which `ablate
ui` lists as studies) carries each side's parent run as a tag, the verdicts' counts and the baselines' ratio as
metrics, change.json and the page as artifacts; MLflow's compare-runs page then sets the two parent runs and the
change's run side by side - their tags are the machine field by field, so the environments' differences show there
as in the report.

MLflow compares only runs one store holds: the change is logged to the store of the results folder it is written
under (or `MLFLOW_TRACKING_URI`), and a side whose parent run that store does not hold (another results folder,
another server) is named rather than put in the address. MLflow is a copy here too: where it cannot be reached the
comparison is still written, and the caller says why it is not in MLflow.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from ablate.tracking import view
from ablate.tracking.tracker import artifact_location, quick_requests, tracking_uri, why

EXPERIMENT_PREFIX = "ablate-changes/"
SIDE_TAG = "ablate.change.{side}_parent_run"  # a side's study parent run ("a", "b"), on the change's run


@dataclass(frozen=True)
class LoggedChange:
    """The change's run, the compare-runs address, and the sides whose parent run the store does not hold."""

    run_id: str
    url: str
    uri: str  # the store it is in
    missing: tuple[str, ...]  # "A", "B": no parent run recorded, or not in this store


def log_change(results: Path, study: str, name: str, parents: Mapping[str, str | None],
               metrics: Mapping[str, float], artifacts: Sequence[Path], port: int = view.UI_PORT) -> LoggedChange | str:
    """The change logged to the results folder's store (`tracking_uri`) as a run named `name` in
    `ablate-changes/study`, linking `parents` (side label -> that study's parent run id, None where its summary
    recorded none); a `LoggedChange`, or why MLflow could not take it (one line)."""
    uri = tracking_uri(results)
    try:
        if uri.startswith("sqlite:///"):
            results.mkdir(parents=True, exist_ok=True)
        with quick_requests():
            client = MlflowClient(tracking_uri=uri)
            held = {side: (run, of) for side, run in parents.items() if run and (of := _experiment_of(client, run))}
            experiment = _experiment(client, EXPERIMENT_PREFIX + study, results, uri)
            tags = {SIDE_TAG.format(side=side.lower()): run for side, run in parents.items() if run}
            run = client.create_run(experiment, run_name=name, tags={**tags, "ablate.study": study})
            now = int(time.time() * 1000)
            client.log_batch(run.info.run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()])
            for path in artifacts:
                client.log_artifact(run.info.run_id, str(path))
            client.set_terminated(run.info.run_id)
            linked = dict([*held.values(), (run.info.run_id, experiment)])  # A and B may share one parent run
    except Exception as error:  # unreachable, refused, misconfigured: all mean "not in MLflow now"
        return f"MLflow at {uri} is unreachable ({why(error)})"
    return LoggedChange(run.info.run_id, view.compare_url(uri, list(linked), list(linked.values()), port=port), uri,
                  tuple(side for side in parents if side not in held))


def _experiment_of(client: MlflowClient, run_id: str) -> str | None:
    """The experiment of `run_id` in this store; None where the store does not hold it."""
    try:
        return str(client.get_run(run_id).info.experiment_id)
    except Exception:  # MLflow raises its own error for a run it does not hold
        return None


def _experiment(client: MlflowClient, name: str, results: Path, uri: str) -> str:
    """The change's experiment, created if missing, its artifacts where the studies' experiments keep theirs."""
    if found := client.get_experiment_by_name(name):
        return str(found.experiment_id)
    return client.create_experiment(name, artifact_location=artifact_location(uri, results))

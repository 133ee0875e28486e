"""MLflow logging: one experiment per study, one parent run per study run, one child per trial.

The only module that imports mlflow. Runs go through `MlflowClient`, so any
tracking URI works: the default SQLite file under the results folder (what
`ablate ui` opens), or ``MLFLOW_TRACKING_URI`` (a server, another database).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from ablate.machine import Machine
from ablate.study import Study

MAX_BATCH = 100  # log_batch accepts at most 100 params or 1000 metrics; stay well below


def tracking_uri(results: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(results / 'mlflow.db').resolve()}"


class Tracker:
    def __init__(self, study: Study, machine: Machine, results: Path) -> None:
        results.mkdir(parents=True, exist_ok=True)
        self.uri = tracking_uri(results)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.study, self.machine = study, machine
        name = f"ablate/{study.name}"
        experiment = self.client.get_experiment_by_name(name)
        self.experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(
            name, artifact_location=(results / "mlartifacts").resolve().as_uri())

    def _tags(self) -> dict[str, str]:
        return {**self.machine.tags(), "ablate.study": self.study.name, "ablate.study_hash": self.study.file_hash}

    def start_parent(self, search: str, run_id: str | None = None) -> str:
        """A new parent run, or the given one reopened (a resumed study keeps its parent)."""
        if run_id and self._exists(run_id):
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        run = self.client.create_run(self.experiment_id, run_name=f"{self.study.name} {search} on {self.machine.device_name}",
                                     tags={**self._tags(), "ablate.search": search})
        return run.info.run_id

    def _exists(self, run_id: str) -> bool:
        try:
            return self.client.get_run(run_id).info.experiment_id == self.experiment_id
        except Exception:  # noqa: BLE001 - a run deleted by the user is simply not reused
            return False

    def start_trial(self, parent_id: str, number: int, combination: str, params: dict[str, Any]) -> str:
        tags = {**self._tags(), MLFLOW_PARENT_RUN_ID: parent_id, MLFLOW_RUN_NAME: f"#{number} {combination}",
                "ablate.trial_number": str(number), "ablate.combination": combination, "ablate.state": "running"}
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=tags[MLFLOW_RUN_NAME])
        self._log(run.info.run_id, params=params)
        return run.info.run_id

    def finish_trial(self, run_id: str, state: str, reason: str = "", metrics: dict[str, float] | None = None,
                     tags: dict[str, str] | None = None) -> None:
        self._log(run_id, metrics=metrics or {}, tags={**(tags or {}), "ablate.state": state, "ablate.reason": reason})
        self.client.set_terminated(run_id, status={"complete": "FINISHED", "skipped": "FINISHED",
                                                   "failed": "FAILED", "killed": "KILLED"}[state])

    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        self._log(run_id, metrics=metrics)

    def log_report(self, run_id: str, folder: Path, metrics: dict[str, float]) -> None:
        """The report's files as artifacts of the parent run (under report/), its figures as metrics."""
        self.client.log_artifacts(run_id, str(folder), artifact_path=f"report/{folder.name}")
        self._log(run_id, metrics=metrics)

    def finish_parent(self, run_id: str, artifacts: list[Path], status: str = "FINISHED") -> None:
        for path in artifacts:
            self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id, status=status)

    def _log(self, run_id: str, params: dict[str, Any] | None = None, metrics: dict[str, float] | None = None,
             tags: dict[str, str] | None = None) -> None:
        now = int(time.time() * 1000)
        entries = (
            [Param(k, str(v)) for k, v in (params or {}).items()]
            + [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
            + [RunTag(k, str(v)) for k, v in (tags or {}).items()]
        )
        for i in range(0, len(entries), MAX_BATCH):
            chunk = entries[i:i + MAX_BATCH]
            self.client.log_batch(run_id, params=[e for e in chunk if isinstance(e, Param)],
                                  metrics=[e for e in chunk if isinstance(e, Metric)],
                                  tags=[e for e in chunk if isinstance(e, RunTag)])

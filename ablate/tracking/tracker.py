"""MLflow logging: one experiment per study, one parent run per study run, one child per measurement (trial).

The only module that imports mlflow. Runs go through `MlflowClient`, so any
tracking URI works: the default SQLite file under the results folder (what
`ablate ui` opens), or ``MLFLOW_TRACKING_URI`` (a server, another database).

MLflow is a copy of the results, never their keeper (that is the Optuna
storage): when it cannot be reached the Tracker goes *offline*, its methods
do nothing and return None run ids, and `ablate sync` pushes the missing runs
later. Reachability is probed once at start with a short timeout and no
retries, because MLflow's HTTP client otherwise retries with backoff for
minutes before it gives up.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

from mlflow.entities import Metric, Param, RunTag
from mlflow.environment_variables import (
    MLFLOW_HTTP_REQUEST_MAX_RETRIES,
    MLFLOW_HTTP_REQUEST_TIMEOUT,
    MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT,
)
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from ablate.config.study import Study
from ablate.tracking import view
from ablate.trial.machine import Machine

MAX_BATCH = 100  # log_batch accepts at most 100 params or 1000 metrics; stay well below
PROBE_TIMEOUT_S = 5
STATUS = {"complete": "FINISHED", "skipped": "FINISHED", "failed": "FAILED", "killed": "KILLED"}

T = TypeVar("T")
# MLflow's client prints a "View run ... at" link for every run it ends on a server, between our progress
# lines; the CLI names the server and the parent run once instead. A user's own setting wins.
os.environ.setdefault(MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT.name, "true")
# MLflow's client retries a request 7 times with backoff, about four minutes for a server that is down, and a
# study would wait on it between measurements. One retry and a 10-s timeout: the tracker goes offline instead,
# and what MLflow missed is logged when it answers again (`Tracker.reconnect`) or by `ablate sync`. A user's own
# settings win.
os.environ.setdefault(MLFLOW_HTTP_REQUEST_MAX_RETRIES.name, "1")
os.environ.setdefault(MLFLOW_HTTP_REQUEST_TIMEOUT.name, "10")
RECONNECT_S = 60  # offline in a run: how often MLflow is asked whether it answers again


def tracking_uri(results: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(results / 'mlflow.db').resolve()}"


def artifact_location(uri: str, results: Path) -> str | None:
    """Where a new experiment keeps its artifacts: a local store, beside itself in the results folder; a tracking
    server, where it was told to (`--artifacts-destination`: None)."""
    return None if view.served(uri) else (results / "mlartifacts").resolve().as_uri()


def study_views(uri: str, port: int) -> dict[str, str]:
    """Each study's experiment in the store at `uri` -> the address of its view on `ablate ui --port port`."""
    found = MlflowClient(tracking_uri=uri).search_experiments(filter_string="name LIKE 'ablate/%'")
    return {e.name: view.url(uri, e.experiment_id, port=port) for e in found}


def trial_params(levels: Mapping[str, str], strategy_params: Mapping[str, Any]) -> dict[str, Any]:
    """A trial run's params: each dimension's level as ``dim.NAME``, then the composed strategies' own settings as
    ``strategy.NAME.SETTING``. MLflow's Compare view plots the first three differing params in sorted order:
    the prefixes make those the study's dimensions."""
    return {**{f"{view.DIMENSION}{dim}": label for dim, label in levels.items()},
            **{f"{view.SETTING}{key}": value for key, value in strategy_params.items()}}


@contextlib.contextmanager
def quick_requests() -> Iterator[None]:
    """MLflow's HTTP settings for one fast probe: no retries, a short timeout (read when each request is made)."""
    saved = {v.name: os.environ.get(v.name) for v in (MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT)}
    os.environ[MLFLOW_HTTP_REQUEST_MAX_RETRIES.name] = "0"
    os.environ[MLFLOW_HTTP_REQUEST_TIMEOUT.name] = str(PROBE_TIMEOUT_S)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def why(error: BaseException) -> str:
    """One short line: the OS error under MLflow's and urllib3's wrappers when there is one."""
    text = " ".join(str(error).split()).split(" [SQL: ")[0]  # SQLAlchemy's statement and parameters: not the why
    found = re.search(r"\[Errno -?\d+\] [^'\")\]]+", text)
    return found.group(0) if found else text[:200] or type(error).__name__


def _tolerant(method: Callable[..., T]) -> Callable[..., T | None]:
    """Offline: do nothing. A failure: go offline, so a lost tracking server never stops a study."""
    @functools.wraps(method)
    def wrapper(self: Tracker, *args: Any, **kwargs: Any) -> T | None:
        if self.offline:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception as error:  # any tracking failure: the results are safe in Optuna
            self._go_offline(error)
            return None
    return wrapper


class Tracker:
    def __init__(self, study: Study, machine: Machine, results: Path, warn: bool = True,
                 reconnects: bool = False) -> None:
        """`warn`: say on stderr when MLflow turns out unreachable (a caller that fails on it says so itself).
        `reconnects`: the caller asks `reconnect` between measurements, and the warning says so."""
        self.uri = tracking_uri(results)
        self.study, self.machine, self.warn, self.results = study, machine, warn, results
        self.reconnects = reconnects
        self.offline_reason: str | None = None
        self.outages = 0  # times it went offline in this command
        self._probed = 0.0  # when `reconnect` last asked (monotonic)
        self.experiment_id: str | None = None
        try:
            if self.uri.startswith("sqlite:///"):
                results.mkdir(parents=True, exist_ok=True)
            self.client = MlflowClient(tracking_uri=self.uri)
            with quick_requests():
                self.experiment_id = self._experiment(f"ablate/{study.name}", results)
        except Exception as error:  # unreachable, refused, misconfigured: all mean "no MLflow now"
            self._go_offline(error)

    def reconnect(self, now: bool = False) -> bool:
        """Offline: whether MLflow answers again - asked at most every RECONNECT_S unless `now` - and online again
        if it does. The caller then logs what it missed (`ablate.tracking.sync.push_missing`)."""
        if not self.offline or (not now and time.monotonic() - self._probed < RECONNECT_S):
            return False
        self._probed = time.monotonic()
        try:
            if not hasattr(self, "client"):
                self.client = MlflowClient(tracking_uri=self.uri)
            with quick_requests():
                self.experiment_id = self._experiment(f"ablate/{self.study.name}", self.results)
        except Exception:  # still down
            return False
        self.offline_reason = None
        return True

    def _experiment(self, name: str, results: Path) -> str:
        """The study's experiment id, created if missing, with the tags that make MLflow's UI open on the answer
        (`ablate.tracking.view`; set again on an existing one, so its view follows the study's dimensions). A tracking
        server stores artifacts where it was told to (`--artifacts-destination`); a local database keeps them
        beside itself in the results folder."""
        tags = view.experiment_tags((dim for dim, _ in self.study.space), view.quality_metric(self.study))
        if experiment := self.client.get_experiment_by_name(name):
            for key, value in tags.items():
                if experiment.tags.get(key) != value:
                    self.client.set_experiment_tag(experiment.experiment_id, key, value)
            return experiment.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=artifact_location(self.uri, results),
                                                 tags=tags)
        except MlflowException as error:
            if error.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
                raise
            # Workers started together: another one created it between our lookup and our create.
            created = self.client.get_experiment_by_name(name)
            assert created is not None, f"MLflow says experiment {name!r} exists, then finds none"
            return created.experiment_id

    @property
    def _online_experiment_id(self) -> str:
        """The experiment's id: known whenever the tracker is online, so in every `_tolerant` method."""
        assert self.experiment_id is not None, "no MLflow experiment: the tracker is offline"
        return self.experiment_id

    @property
    def view_url(self) -> str | None:
        """Where MLflow's UI shows this study's answer (`ablate.tracking.view`); None when offline."""
        return None if self.offline or self.experiment_id is None else view.url(self.uri, self.experiment_id)

    @property
    def on_server(self) -> bool:
        """Logging to an MLflow tracking server (http), not to a database file or folder on this machine."""
        return view.served(self.uri)

    @property
    def offline(self) -> bool:
        return self.offline_reason is not None

    def _go_offline(self, error: BaseException) -> None:
        self.offline_reason = why(error)
        self.outages += 1
        self._probed = time.monotonic()
        then = (f"the study goes on, and what MLflow misses is logged when it answers again (asked every "
                f"{RECONNECT_S} s)" if self.reconnects else "nothing more is logged to it in this command")
        if self.warn:
            from ablate.render.terminal import message

            print(message(f"ablate: warning: MLflow at {self.uri} is unreachable ({self.offline_reason}); {then}; "
                          "the results are kept in the Optuna storage"), file=sys.stderr)

    def _tags(self, machine: Machine | None = None) -> dict[str, str]:
        return {**(machine or self.machine).tags(), "ablate.study": self.study.name,
                "ablate.study_hash": self.study.file_hash, "ablate.task": self.study.task_name,
                "ablate.throughput_unit": f"{self.study.throughput_unit}/s"}

    @_tolerant
    def start_parent(self, search: str, run_id: str | None = None) -> str | None:
        """A new parent run, or the given one reopened (a resumed study keeps its parent); None: MLflow failed."""
        if run_id and self.has_run(run_id):
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        return self.new_parent(search)

    @_tolerant
    def new_parent(self, search: str) -> str:
        run = self.client.create_run(self._online_experiment_id,
                                     run_name=f"{self.study.name} {search} on {self.machine.device_name}",
                                     tags={**self._tags(), "ablate.search": search})
        return run.info.run_id

    def has_run(self, run_id: str | None) -> bool:
        """Whether `run_id` is a run of this study's experiment (False when offline: nothing can be said)."""
        return self.run_status(run_id) is not None

    def run_status(self, run_id: str | None) -> str | None:
        """The status of `run_id` if it is a run of this study's experiment (RUNNING, FINISHED, ...), else None
        (also when offline: nothing can be said)."""
        if not run_id or self.offline:
            return None
        try:
            run = self.client.get_run(run_id)
        except Exception:  # a run deleted by the user, or one logged elsewhere, is not here
            return None
        return run.info.status if run.info.experiment_id == self.experiment_id else None

    @_tolerant
    def start_trial(self, parent_id: str | None, number: int, combination: str, params: dict[str, Any],
                    machine: Machine | None = None, start_time: int | None = None,
                    place: str = "block 0") -> str | None:
        """A child run for one measurement; `machine` and `start_time` (ms) default to this process's machine and
        now."""
        if not parent_id:
            return None
        name = f"{combination} · {place} · #{number}"
        tags = {**self._tags(machine), MLFLOW_PARENT_RUN_ID: parent_id, MLFLOW_RUN_NAME: name,
                "ablate.trial_number": str(number), "ablate.combination": combination, "ablate.state": "running"}
        run = self.client.create_run(self._online_experiment_id, start_time=start_time, tags=tags,
                                     run_name=tags[MLFLOW_RUN_NAME])
        self._log(run.info.run_id, params=params)
        return run.info.run_id

    @_tolerant
    def kill_stopped(self, parent_id: str | None, runs: Mapping[int, str | None], reason: str) -> None:
        """The MLflow runs of stopped trials (trial number -> its stored run id, or None): KILLED.

        A stop (Ctrl-C, SIGTERM, a kill) that lands between MLflow creating a trial's run and the trial storing
        the run's id leaves a run no trial points at; those are found among `parent_id`'s runs still RUNNING by
        their trial number. Without this they would show as running in MLflow's UI for ever.
        """
        for run_id in filter(None, runs.values()):
            self.finish_trial(run_id, "killed", reason)
        unrecorded = {number for number, run_id in runs.items() if not run_id}
        if not parent_id or not unrecorded:
            return
        for number, run_id in (self.running_children(parent_id) or {}).items():
            if number in unrecorded:
                self.finish_trial(run_id, "killed", reason)

    @_tolerant
    def running_children(self, parent_id: str | None) -> dict[int, str]:
        """Trial number -> the run of `parent_id`'s still RUNNING for it. Also those no trial points at: a stop or an
        outage between MLflow making a run and the trial storing its id."""
        if not parent_id:
            return {}
        found = self.client.search_runs(
            [self._online_experiment_id], max_results=1000,
            filter_string=f"tags.mlflow.parentRunId = '{parent_id}' and attributes.status = 'RUNNING'")
        return {int(number): run.info.run_id for run in found
                if (number := run.data.tags.get("ablate.trial_number", "")).isdigit()}

    @_tolerant
    def finish_trial(self, run_id: str | None, state: str, reason: str = "", metrics: Mapping[str, float] | None = None,
                     tags: dict[str, str] | None = None, end_time: int | None = None) -> None:
        if not run_id:
            return
        self._log(run_id, metrics=metrics or {}, tags={**(tags or {}), "ablate.state": state, "ablate.reason": reason})
        self.client.set_terminated(run_id, status=STATUS[state], end_time=end_time)

    @_tolerant
    def log_metrics(self, run_id: str | None, metrics: Mapping[str, float], tags: dict[str, str] | None = None) -> None:
        if run_id:
            self._log(run_id, metrics=metrics, tags=tags)

    @_tolerant
    def log_report(self, run_id: str | None, folder: Path, metrics: dict[str, float]) -> None:
        """The report's files as artifacts of the parent run (under report/), its figures as metrics."""
        if not run_id:
            return
        self.client.log_artifacts(run_id, str(folder), artifact_path=f"report/{folder.name}")
        self._log(run_id, metrics=metrics)

    @_tolerant
    def finish_parent(self, run_id: str | None, artifacts: list[Path], status: str = "FINISHED") -> None:
        if not run_id:
            return
        for path in artifacts:
            self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id, status=status)

    def _log(self, run_id: str, params: dict[str, Any] | None = None, metrics: Mapping[str, float] | None = None,
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

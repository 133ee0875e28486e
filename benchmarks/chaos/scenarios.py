"""The benchmark's scenarios, each on a study of its own: what was done, what the user saw, and the checks.

Every scenario runs the same `ablate run` command again after each fault until it exits 0 (a few tries), then
checks the stores (`benchmarks.chaos.check`) against the reference run's design.
"""
from __future__ import annotations

import os
import random
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import optuna

from benchmarks.chaos import check, faults
from benchmarks.chaos.harness import ROOT, Ablate, Ran, Running

SUPPORT = ROOT / "tests" / "support"  # the study's model, tiny_mnist
# What a run says of a fault, quoted in the report.
FAULT_WORDS = ("unreachable", "answers again", "missed", "database", "disk", "space", "error", "warning", "traceback")
TRIES = 5  # runs of the same command after the faults, at most, to reach exit status 0
FAULTED_S = 900  # the run that meets an outage: killed by the harness if it has not ended by then


@dataclass
class Setup:
    study: Path
    work: Path
    device: str = "cpu"

    @property
    def name(self) -> str:
        return self.study.stem

    def ablate(self, scenario: str, storage: str | None = None, env: dict[str, str] | None = None,
               results: Path | None = None) -> Ablate:
        folder = self.work / scenario
        if folder.exists():
            shutil.rmtree(folder)
        results = results or folder / "results"
        args = ["run", str(self.study.resolve()), "--device", self.device, "--results", str(results)]
        return Ablate(args + (["--storage", storage] if storage else []), folder / "logs", env, (SUPPORT,))

    def results(self, ablate: Ablate) -> Path:
        return Path(ablate.args[ablate.args.index("--results") + 1])


@dataclass
class Outcome:
    title: str
    did: list[str] = field(default_factory=list)
    saw: list[Ran] = field(default_factory=list)
    checks: list[check.Check] = field(default_factory=list)
    seconds: float = 0.0
    skipped: str | None = None

    def lines(self) -> list[str]:
        out = [f"== {self.title}"]
        if self.skipped:
            return out + [f"skipped: {self.skipped}", ""]
        out += [f"done: {line}" for line in self.did]
        out += [line for ran in self.saw for line in ran.said()]
        out += [c.line() for c in self.checks]
        return out + [f"({self.seconds:.0f} s)", ""]

    @property
    def passed(self) -> bool:
        return self.skipped is None and all(c.passed for c in self.checks)


def trials(storage: str, study: str) -> list[optuna.trial.FrozenTrial]:
    """The study's trials as stored now; none while the storage cannot be read."""
    try:
        return optuna.load_study(study_name=f"{study}:grid:cpu", storage=storage).get_trials(deepcopy=False)
    except Exception:  # not created yet, locked for a moment, or the server is down
        return []


def wait_for(storage: str, study: str, measured: int, running: Running, timeout: float = 900) -> int:
    """Until `measured` measurements have a result (or the run ends): how many have."""
    deadline = time.monotonic() + timeout
    done = 0
    while time.monotonic() < deadline and running.running():
        done = sum(1 for t in trials(storage, study) if check.has_result(t))
        if done >= measured:
            break
        time.sleep(1)
    return done


def reference(setup: Setup) -> tuple[Outcome, check.Design]:
    """One uninterrupted run: the design the others are held to."""
    began = time.monotonic()
    ablate = setup.ablate("reference")
    out = Outcome("reference: one uninterrupted run", ["`ablate run` once, nothing done to it"])
    out.saw = ablate.until_done(tries=1)
    stored = check.read(setup.results(ablate), setup.name)
    design = check.design(stored)
    out.checks = check.check(stored, design)
    out.did.append(f"its design: {len(design.slots)} slots, {len(design.blocks)} combinations, seeds {design.seeds}")
    out.seconds = time.monotonic() - began
    return out, design


def _finish(out: Outcome, setup: Setup, ablate: Ablate, design: check.Design, before: dict[int, object],
            began: float, storage: str | None = None, tracking_uri: str | None = None) -> check.Stored:
    if not out.saw or out.saw[-1].code != 0:
        out.saw += ablate.until_done(tries=TRIES, timeout=900)
    stored = check.read(setup.results(ablate), setup.name, storage, tracking_uri)
    out.checks = [*check.check(stored, design), check.kept(before, stored.trials)]
    out.seconds = time.monotonic() - began
    return stored


def random_kills(setup: Setup, design: check.Design, kills: int, seed: int) -> Outcome:
    """`kills` SIGKILLs of the whole process group, each at a time drawn from `seed` after the command started."""
    began = time.monotonic()
    ablate = setup.ablate("random-kills")
    storage = check.storage_of(setup.results(ablate), setup.name)
    out = Outcome(f"random kills: {kills} SIGKILLs of the process group at seeded times (seed {seed}), each "
                  "followed by the same command")
    draw, before = random.Random(seed), {}
    for i in range(kills):
        at = draw.uniform(1.0, 30.0)
        running = ablate.start()
        time.sleep(at)
        ended_itself = not running.running()
        running.kill()
        ran = running.wait()
        stored = trials(storage, setup.name)
        before.update(check.finished(stored))
        out.saw.append(ran)
        out.did.append(f"kill {i + 1} at {at:.1f} s: " + ("the run had ended by itself" if ended_itself else
                       f"{sum(1 for t in stored if check.has_result(t))} of {len(design.slots)} measured after it"))
    _finish(out, setup, ablate, design, before, began)
    return out


FIXED = (("plan", 1), ("result", 5), ("measurement", 10), ("report", 3), ("end", 2))


def fixed_kills(setup: Setup, design: check.Design) -> Outcome:
    """A kill at each of `kill_at`'s points in turn: as the first slot of the plan is queued, as a result is
    stored, after a measurement, half-way through the report's summary.json, in the MLflow wrap-up."""
    began = time.monotonic()
    ablate = setup.ablate("fixed-kills")
    storage = check.storage_of(setup.results(ablate), setup.name)
    out = Outcome("fixed kills: " + ", ".join(f"at {p} {n}" for p, n in FIXED) + ", each followed by the same "
                  "command")
    before: dict[int, object] = {}
    for point, n in FIXED:
        ran = ablate.run(point, n, timeout=900)
        out.saw.append(ran)
        before.update(check.finished(trials(storage, setup.name)))
        if not ran.fired:
            out.did.append(f"kill at {point} {n}: never reached (exit status {ran.code})")
    _finish(out, setup, ablate, design, before, began)
    out.checks.append(check.Check("every kill fired where it was set", all(r.fired for r in out.saw[:len(FIXED)]),
                                  f"{sum(1 for r in out.saw[:len(FIXED)] if r.fired)} of {len(FIXED)}"))
    return out


def mlflow_outage(setup: Setup, design: check.Design, down_s: float, at: int) -> Outcome:
    """The MLflow tracking server stopped after `at` measurements, started again `down_s` later on its port and
    backend store."""
    began = time.monotonic()
    server = faults.MlflowServer(setup.work / "mlflow-outage-server")
    shutil.rmtree(server.folder / "artifacts", ignore_errors=True)
    (server.folder / "mlflow-server.db").unlink(missing_ok=True)
    out = Outcome(f"MLflow outage: the tracking server stopped for {down_s:.0f} s after {at} measurements")
    started = server.start()
    out.did.append(f"mlflow server on {server.uri} (SQLite backend store), answering after {started:.0f} s")
    ablate = setup.ablate("mlflow-outage", env={"MLFLOW_TRACKING_URI": server.uri})
    storage = check.storage_of(setup.results(ablate), setup.name)
    try:
        running = ablate.start()
        done = wait_for(storage, setup.name, at, running)
        server.stop()
        down = datetime.now()
        out.did.append(f"server killed at {done} measured")
        time.sleep(down_s)
        restarted = server.start()
        up = datetime.now()
        out.did.append(f"server started again on the same port and store after {(up - down).total_seconds():.0f} s "
                       f"(answering after {restarted:.0f} s)")
        first = running.wait(timeout=FAULTED_S)
        out.saw.append(first)
        out.did += [f"it said: {line.strip()}" for line in first.about(*FAULT_WORDS)]
        ended = [d for t in trials(storage, setup.name) if check.has_result(t) and (d := t.datetime_complete)]
        during = sum(1 for d in ended if down <= d <= up)
        after = min((d for d in ended if d > up), default=None)
        gap = f"{(after - up).total_seconds():.0f} s" if after else "none"
        out.did.append(f"measurements finished while it was down: {during}; the first after it answered again: {gap}")
        before = check.finished(trials(storage, setup.name))
        if first.code != 0:
            out.saw += ablate.until_done(tries=TRIES, timeout=900)
        stored = check.read(setup.results(ablate), setup.name, tracking_uri=server.uri)
        out.checks = [*check.check(stored, design), check.kept(before, stored.trials),
                      check.Check("measuring went on while MLflow was down", during > 0,
                                  f"{during} measurements in the {(up - down).total_seconds():.0f} s; the next after "
                                  f"it came back: {gap}")]
        if not all(c.passed for c in out.checks) and "ablate sync" in first.output:
            out.saw.append(ablate.sync())  # what the run's own lines told the user to do
            stored = check.read(setup.results(ablate), setup.name, tracking_uri=server.uri)
            out.checks += [check.Check(f"after ablate sync: {c.name}", c.passed, c.detail)
                           for c in check.check(stored, design) if "MLflow" in c.name or "parent" in c.name]
    finally:
        server.stop()
    out.seconds = time.monotonic() - began
    return out


def postgres_restart(setup: Setup, design: check.Design, url: str, down_s: float, at: int) -> Outcome:
    """The PostgreSQL cluster of the study's `--storage` stopped after `at` measurements, started `down_s` later."""
    began = time.monotonic()
    out = Outcome(f"PostgreSQL restart: the study's database server stopped for {down_s:.0f} s after {at} "
                  "measurements")
    server = faults.Postgres(url)
    database = server.open()
    if database is None:
        out.skipped = server.why
        return out
    try:
        if server.started_here:
            out.did.append(f"started the PostgreSQL cluster {' '.join(server.cluster or ())} (it was down; stopped "
                           "again afterwards)")
        ablate = setup.ablate("postgres-restart", storage=database)
        running = ablate.start()
        done = wait_for(database, setup.name, at, running)
        server.ctl("stop")
        out.did.append(f"pg_ctlcluster {' '.join(server.cluster or ())} stop at {done} measured")
        time.sleep(down_s)
        server.ctl("start")
        out.did.append(f"pg_ctlcluster {' '.join(server.cluster or ())} start after {down_s:.0f} s")
        first = running.wait(timeout=FAULTED_S)
        out.saw.append(first)
        out.did += [f"it said: {line.strip()}" for line in first.about(*FAULT_WORDS)]
        before = check.finished(trials(database, setup.name))
        _finish(out, setup, ablate, design, before, began, storage=database)
        rode = first.code == 0 or "Traceback" not in first.output
        out.checks.append(check.Check("the restart ridden through, or one line and a clean resume", rode,
                                      f"the run that saw it: exit status {first.code}"
                                      + (", a traceback" if "Traceback" in first.output else "")))
    finally:
        server.close()
    return out


def full_disk(setup: Setup, design: check.Design, size_mb: int, at: int) -> Outcome:
    """The results folder on a tmpfs of `size_mb` MiB, filled to the last byte after `at` measurements, then
    enlarged by as much again."""
    began = time.monotonic()
    out = Outcome(f"full disk: the results folder on a {size_mb} MiB tmpfs, filled after {at} measurements, "
                  "then enlarged")
    if os.geteuid() != 0:
        out.skipped = "mounting a tmpfs needs root"
        return out
    folder = setup.work / "full-disk"
    ablate = setup.ablate("full-disk")
    results = setup.results(ablate)
    storage = check.storage_of(results, setup.name)
    with faults.tmpfs(results, size_mb):
        running = ablate.start()
        done = wait_for(storage, setup.name, at, running)
        filled = faults.fill(results)
        out.did.append(f"filled at {done} measured: {filled / 2**20:.1f} MiB written, "
                       f"{faults.free_bytes(results)} bytes left")
        first = running.wait(timeout=FAULTED_S)
        out.saw.append(first)
        out.did += [f"it said: {line.strip()}" for line in first.about(*FAULT_WORDS)]
        before = check.finished(trials(storage, setup.name))
        faults.enlarge(results, 2 * size_mb)
        out.did.append(f"mount -o remount,size={2 * size_mb}m: {faults.free_bytes(results) / 2**20:.0f} MiB free")
        _finish(out, setup, ablate, design, before, began)
        out.checks += [check.integrity(results / setup.name / "optuna.db"), check.integrity(results / "mlflow.db")]
        said = first.code == 2 and "Traceback" not in first.output
        out.checks.append(check.Check("the full disk said in one line, exit status 2", said,
                                      f"the run that met it: exit status {first.code}"
                                      + (", a traceback" if "Traceback" in first.output else "")))
        shutil.copytree(results, folder / "results-kept", ignore=shutil.ignore_patterns("filler"))
    return out

"""A study stored by the code before ablate/ was split into packages (commit 46e5984) still resumes.

tests/support/before_the_move/ holds the tiny study stopped during screening at that commit, and the structure
its complete run had then (checked against today's run in test_end_to_end.py)."""
from __future__ import annotations

import dataclasses
import shutil
import tarfile
import tempfile
from pathlib import Path

import optuna
import pytest

from ablate.cli import main
from ablate.config import study as studies
from ablate.config.study import Study
from ablate.trial import machine
from ablate.trial.machine import describe

BEFORE = Path(__file__).resolve().parents[1] / "support" / "before_the_move"
TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
# Where the stopped study was written: its MLflow experiment keeps that folder as its artifact root.
STORED_AT = Path(tempfile.gettempdir()) / "ablate-stored-before-the-move"


def _unprofiled(study: Study) -> Study:
    return dataclasses.replace(study, budget=dataclasses.replace(study.budget, profile_steps=0))


@pytest.fixture
def stored_before_the_move():
    shutil.rmtree(STORED_AT, ignore_errors=True)
    with tarfile.open(BEFORE / "tiny_stopped.tgz") as archive:
        archive.extractall(STORED_AT, filter="data")
    yield STORED_AT
    shutil.rmtree(STORED_AT, ignore_errors=True)


@pytest.mark.slow
def test_a_study_stopped_before_the_move_resumes_and_keeps_its_measurements(stored_before_the_move, mnist,
                                                                          monkeypatch, capsys):
    storage = f"sqlite:///{stored_before_the_move / 'tiny' / 'optuna.db'}"
    # As a release before issue 47 would have stored it: the equivalence margin at its former default, 2% (now
    # derived from the design). The resume keeps it and says so (`ablate.config.design.resumed`).
    before = optuna.load_study(study_name="tiny:grid:cpu", storage=storage)
    before.set_user_attr("protocol", {**before.user_attrs["protocol"], "equivalence_margin": 0.02})
    stored = before.get_trials()
    kept = {t.number: t.user_attrs["metrics"]["throughput"] for t in stored if t.user_attrs.get("state") == "complete"}
    assert len(kept) == 6  # as it was stopped: part of screening measured
    # The same machine as the one that stored it (a study measured on another CPU model is another device's):
    # this machine's CPU changes from session to session.
    name = stored[0].user_attrs["machine"]["device_name"]
    monkeypatch.setattr(machine, "describe", lambda device: dataclasses.replace(describe(device), device_name=name))
    # Without the profiling window, which 46e5984 did not have and nothing here reads: on mnist_cnn's budget it is
    # seconds a trial (up to window_seconds where bf16 is emulated). The resume checks the file's hash, of its text.
    load = studies.load
    monkeypatch.setattr(studies, "load", lambda *args: _unprofiled(load(*args)))

    assert main(["run", str(TINY), "--device", "cpu", "--results", str(stored_before_the_move)]) == 0
    assert "resuming under the stored study's equivalence_margin=0.02" in capsys.readouterr().out
    trials = optuna.load_study(study_name="tiny:grid:cpu", storage=storage).get_trials()
    assert {t.number: t.user_attrs["metrics"]["throughput"] for t in trials if t.number in kept} == kept
    assert {t.user_attrs["phase"] for t in trials} >= {"screen", "race", "parity"}  # the rest ran after the resume
    assert all(t.state.is_finished() for t in trials)  # nothing left queued or running
    rows = (stored_before_the_move / "tiny" / "grid-cpu.csv").read_text().splitlines()
    assert sum(",complete," in row for row in rows) == 4  # every combination a CPU runs has its row

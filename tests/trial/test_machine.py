"""The stored machine: what a result was measured on, read on this CPU, through CUDA stand-ins, from older records."""
from __future__ import annotations

import dataclasses
import os
import platform
import re
import uuid
from pathlib import Path
from types import SimpleNamespace

import optuna
import torch
from optuna.trial import TrialState

from ablate.store import records
from ablate.trial import machine
from ablate.trial.machine import Machine, describe
from ablate.trial.process import TrialSpec, run_in_fresh_process

from fake_cuda import FakeCUDA

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
NEW = ("python", "threads", "cuda", "cudnn", "driver", "gpu_uuid")
# A machine as records stored it before the fields above existed.
OLDER = {"device": "cpu", "device_name": "Xeon (2 cores)", "torch": "2.9.0", "commit": "abc123", "host": "box"}
UUID = uuid.UUID("6f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
BANNER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: 12\n"
OPEN_BANNER = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16)\n"


def test_a_cpu_machine_names_its_python_threads_and_build_and_no_driver_or_gpu():
    found = describe("cpu")
    assert found.python == platform.python_version()
    assert found.threads == str(torch.get_num_threads()) and int(found.threads) >= 1
    assert found.cuda == (torch.version.cuda or "none")  # the build's, though the study measures the CPU
    assert found.cudnn == "none" or re.fullmatch(r"\d+\.\d+\.\d+", found.cudnn)
    assert (found.driver, found.gpu_uuid) == ("none", "none")


def test_cudnn_s_number_reads_as_its_version_under_both_of_its_encodings(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    for number, version in ((92400, "9.24.0"), (90100, "9.1.0"), (8907, "8.9.7")):
        monkeypatch.setattr(torch.backends.cudnn, "version", lambda number=number: number)
        assert describe("cpu").cudnn == version
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: False)
    assert describe("cpu").cudnn == "none"


def test_the_tags_carry_every_field_the_new_ones_included():
    found = describe("cpu")
    tags = found.tags()
    assert tags == {f"ablate.{f.name}": getattr(found, f.name) for f in dataclasses.fields(Machine)}
    assert {f"ablate.{name}" for name in NEW} <= set(tags) and tags["ablate.threads"] == found.threads


def _on_a_fake_gpu(monkeypatch, banner: str | None, tmp_path: Path) -> Machine:
    FakeCUDA(current=1).install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: SimpleNamespace(uuid=UUID) if torch.device(device).index == 1 else None)
    version = tmp_path / "version"
    if banner is not None:
        version.write_text(banner)
    monkeypatch.setattr(machine, "NVIDIA_VERSION", version)
    return describe("cuda")


def test_a_cuda_device_names_its_driver_from_the_kernel_module_and_its_gpu_by_uuid(monkeypatch, tmp_path):
    found = _on_a_fake_gpu(monkeypatch, BANNER, tmp_path)
    assert (found.device, found.device_name) == ("cuda:1", FakeCUDA.NAME)
    assert (found.driver, found.gpu_uuid) == ("550.54.15", str(UUID))
    assert found.tags()["ablate.gpu_uuid"] == str(UUID)
    assert _on_a_fake_gpu(monkeypatch, OPEN_BANNER, tmp_path).driver == "570.86.15"  # the open kernel modules


def test_without_the_kernel_module_s_file_the_driver_comes_from_nvidia_smi_else_reads_unknown(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$1 $2" = "--query-gpu=driver_version --format=csv,noheader" ] || exit 9\n'
                   'printf "550.54.15\\n550.54.15\\n"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert _on_a_fake_gpu(monkeypatch, None, tmp_path).driver == "550.54.15"
    smi.write_text("#!/bin/sh\nexit 9\n")  # a driver that does not answer
    assert _on_a_fake_gpu(monkeypatch, None, tmp_path).driver == "unknown"


def test_an_older_record_reads_unknown_for_the_fields_it_predates():
    assert set(records.UNKNOWN_MACHINE) == {f.name for f in dataclasses.fields(Machine)}  # spelled twice, held alike
    trial = optuna.trial.create_trial(state=TrialState.COMPLETE, values=[1000.0, 0.0], params={}, distributions={},
                                      user_attrs={"state": "complete", "machine": OLDER})
    stored = records.from_trial(trial).machine
    assert {k: stored[k] for k in OLDER} == OLDER and all(stored[k] == "unknown" for k in NEW)
    # What `ablate sync` logs for it (ablate.tracking.sync), from the record or from the stored dict itself.
    for read in (Machine.from_stored(stored), Machine.from_stored(OLDER)):
        assert read.device_name == OLDER["device_name"] and read.tags()["ablate.cuda"] == "unknown"
        assert all(getattr(read, name) == "unknown" for name in NEW)
    assert Machine.from_stored({**OLDER, "a field to come": "x"}) == Machine(**OLDER)  # a newer record's extra key


def test_a_new_trial_stores_every_field_and_reads_them_back():
    found = describe("cpu")
    study = optuna.create_study(directions=["maximize", "maximize"])

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        records.start(trial, "baseline", dataclasses.asdict(found), "host:1")  # as ablate.run.objective writes it
        return 1000.0, 98.0

    study.optimize(objective, n_trials=1)
    assert Machine.from_stored(records.from_trial(study.trials[0]).machine) == found


def threads_in_the_trial(spec: TrialSpec) -> dict[str, int]:
    return {"threads": torch.get_num_threads()}


def test_the_stored_thread_count_is_the_one_a_trial_s_interpreter_computes_with():
    # describe() runs in the study's process; the trials run in interpreters it spawns (ablate.trial.interpreters).
    from ablate.config import study as studies

    study = studies.load(str(TINY), "cpu")
    spec = TrialSpec(study, tuple(opts[0] for _, opts in study.space), "cpu", train_for_accuracy=False)
    assert str(run_in_fresh_process(spec, threads_in_the_trial)["threads"]) == describe("cpu").threads

"""What a result was measured on: the device and the software around it, as a trial's record stores it.

A result is only as portable as its environment, and the same study measured again (after an upgrade, on another
machine: `ablate compare`) moves with whatever changed: the torch build and the CUDA, cuDNN and driver under it,
the Python, the CPU threads torch computes with, the very GPU. So the record names each, read without a new
dependency: torch says its build, the kernel module says the driver (`nvidia-smi` where the module's file is not
mounted). A value is "none" where the thing is absent (no CUDA in a CPU-only build, no driver or GPU behind a CPU
measurement) and "unknown" where it could not be read - and for every field a record stored before it existed
(`ablate.store.records.UNKNOWN_MACHINE`, `Machine.from_stored`).
"""
from __future__ import annotations

import dataclasses
import os
import platform
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import torch

UNKNOWN = "unknown"  # not read: a record older than the field, or a value the machine would not give
NONE = "none"  # read, and absent: no CUDA in the build, no driver or GPU behind a CPU measurement


@dataclass(frozen=True)
class Machine:
    device: str  # "cpu" or "cuda:0"
    device_name: str
    torch: str
    commit: str
    host: str
    # The fields below default to "unknown": call sites and stand-ins that name only those above still build.
    python: str = UNKNOWN
    threads: str = UNKNOWN  # torch's intra-op CPU threads in the trials (a string, as every stored field is)
    # The build's, whatever the device: a CPU study on a CUDA build runs that build.
    cuda: str = UNKNOWN  # the CUDA torch was built with (torch.version.cuda), "none" in a CPU-only build
    cudnn: str = UNKNOWN  # the cuDNN torch loads, as major.minor.patch
    # The device's: "none" behind a CPU measurement.
    driver: str = UNKNOWN  # the NVIDIA driver's version
    gpu_uuid: str = UNKNOWN  # which GPU measured, of several alike (`nvidia-smi -L` prints it after "GPU-")

    @property
    def device_type(self) -> str:
        return torch.device(self.device).type

    def tags(self) -> dict[str, str]:
        """MLflow's tags: each field as `ablate.<field>`."""
        return {f"ablate.{name}": value for name, value in dataclasses.asdict(self).items()}

    @classmethod
    def from_stored(cls, stored: Mapping[str, str]) -> Machine:
        """A trial's stored machine, "unknown" for each field it predates; a key no field has is dropped."""
        return cls(**{f.name: str(stored.get(f.name, UNKNOWN)) for f in dataclasses.fields(cls)})


def default_device() -> str:
    return "cuda:0" if torch.cuda.is_available() else "cpu"


def resolve(device: str | torch.device) -> torch.device:
    """`device` with an index: a bare "cuda" becomes the current CUDA device ("cuda:0" unless set otherwise).

    Why everywhere, not only where it fails: `torch.cuda.set_device` refuses a device without an index
    ("Expected a torch.device with a specified index or an integer"), and a record, an MLflow tag or a
    worker that says "cuda" cannot tell which of several GPUs measured it.
    """
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return dev


def describe(device: str | torch.device) -> Machine:
    """The machine a study on `device` measures on, read in the study's process.

    Read here, stored with every trial, yet true of the trial's own interpreter: a trial runs in an interpreter
    this process spawns (ablate.trial.interpreters), which inherits its environment (OMP_NUM_THREADS,
    MKL_NUM_THREADS) and CPU affinity, the two things torch sizes its intra-op pool from, and neither ablate nor
    `strategies` calls torch.set_num_threads. So `threads` is the count the trials measured with
    (tests/trial/test_machine.py checks it against a trial's own); a study's own code that sets the count in its
    model or loader is the one way round it.
    """
    dev = resolve(device)
    on_cuda = dev.type == "cuda" and torch.cuda.is_available()
    if on_cuda:
        name = torch.cuda.get_device_name(dev)
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        name = f"{_cpu_model()} ({cores} cores)"
    return Machine(str(dev), name, torch.__version__, commit(), socket.gethostname(),
                   python=platform.python_version(), cuda=torch.version.cuda or NONE, cudnn=_cudnn(),
                   driver=_driver() if on_cuda else NONE, gpu_uuid=_gpu_uuid(dev) if on_cuda else NONE,
                   threads=str(torch.get_num_threads()))


COMMIT_ENV = "ABLATE_COMMIT"


ROOT = Path(__file__).resolve().parents[2]  # the checkout: ablate/trial/machine.py


def commit(root: Path = ROOT) -> str:
    """The checkout's commit (with +dirty when there are uncommitted changes), else $ABLATE_COMMIT, else 'unknown'.

    A lent GPU machine gets a copy of the working tree without `.git`; `python -m benchmarks.gpu pack` writes
    the commit beside the wheels it carries, and the device command exports it as ABLATE_COMMIT.
    """
    if not (root / ".git").exists() and os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get(COMMIT_ENV) or UNKNOWN


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def _cudnn() -> str:
    """The cuDNN torch loads, as major.minor.patch; "none" where the build has none. Its number is
    major*10000 + minor*100 + patch from cuDNN 9 on, major*1000 + minor*100 + patch before (cudnn_version.h)."""
    try:
        number = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except RuntimeError:  # a cuDNN library torch refuses to load (a version it was not built against)
        return UNKNOWN
    if not number:
        return NONE
    major, rest = divmod(number, 10000 if number >= 90000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _gpu_uuid(dev: torch.device) -> str:
    """The CUDA device's UUID, which no other GPU shares; "unknown" where torch's properties lack it."""
    try:
        return str(torch.cuda.get_device_properties(dev).uuid)
    except (AttributeError, AssertionError, RuntimeError):  # an older torch; a device torch cannot read
        return UNKNOWN


NVIDIA_VERSION = Path("/proc/driver/nvidia/version")  # the kernel module's banner: the driver's version is in it
NVIDIA_SMI_TIMEOUT_S = 10.0  # a driver that hangs (a GPU fallen off the bus) must not hang the study


def _driver() -> str:
    """The NVIDIA driver's version ("550.54.15"), from the kernel module's banner, else `nvidia-smi`; "unknown"
    where neither answers (not Linux, ROCm, a container that mounts neither)."""
    try:
        # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ...", or "... Open Kernel Module for
        # x86_64  550.54.15  Release Build ..." for the open modules.
        found = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)*)\b", NVIDIA_VERSION.read_text())
        if found:
            return found.group(1)
    except OSError:
        pass
    try:  # one line per GPU, all the same driver
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True, timeout=NVIDIA_SMI_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    lines = out.split()
    return lines[0] if lines else UNKNOWN

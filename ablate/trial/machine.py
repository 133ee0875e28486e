"""What a result was measured on: device, torch version, commit, host."""
from __future__ import annotations

import os
import platform
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class Machine:
    device: str  # "cpu" or "cuda:0"
    device_name: str
    torch: str
    commit: str
    host: str

    @property
    def device_type(self) -> str:
        return torch.device(self.device).type

    def tags(self) -> dict[str, str]:
        return {"ablate.device": self.device, "ablate.device_name": self.device_name,
                "ablate.torch": self.torch, "ablate.commit": self.commit, "ablate.host": self.host}


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
    dev = resolve(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(dev)
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        name = f"{_cpu_model()} ({cores} cores)"
    return Machine(str(dev), name, torch.__version__, commit(), socket.gethostname())


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
        return os.environ.get(COMMIT_ENV) or "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"

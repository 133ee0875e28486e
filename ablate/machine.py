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


def describe(device: str) -> Machine:
    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(dev)
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        name = f"{_cpu_model()} ({cores} cores)"
    return Machine(str(dev), name, torch.__version__, commit(), socket.gethostname())


def commit() -> str:
    """The checkout's commit (with +dirty when there are uncommitted changes), or 'unknown'."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"

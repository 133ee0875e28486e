"""Energy over the timed windows, where the hardware counts it: joules per sample, and which counter said so.

A speed-up says nothing of what it costs in energy: a strategy that keeps more of the device busy can be
faster and draw more, or faster and draw less. Both counters used here are cumulative, kept by the hardware,
so two readings bracket a stretch exactly, with nothing sampled in between; the trial reads them where it
reads the foreign load (`ablate.trial.foreign_load`): as the first timed window opens and as the last one closes,
and around an evaluation that falls inside the windows, whose energy is taken off as its time is.

- **CUDA: NVML** (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded; Volta and
  newer): the trial's GPU, the whole board. Found by its PCI address, not its index: CUDA numbers the devices
  it is shown (``CUDA_VISIBLE_DEVICES``), fastest first by default, and NVML numbers all of them in PCI order,
  so ``cuda:0`` need not be NVML's device 0. Through nvidia-ml-py's ``pynvml``, imported only on CUDA; without
  it, without a driver, or where the GPU does not count energy (``NVMLError_NotSupported``), nothing is counted.
- **Elsewhere: RAPL** (``/sys/class/powercap/intel-rapl:N/energy_uj``, microjoules): the processor packages,
  summed (top-level ``package-N`` domains only: their core and uncore subdomains ``intel-rapl:N:M`` are inside
  them, and a ``psys`` domain holds the whole platform, packages included). Each counter wraps to zero at its
  ``max_energy_range_uj``; a reading that went down wrapped once (more than once would take a stretch longer than
  the counter's range at full power: minutes, longer than the windows). Since the fix for CVE-2020-8694
  (November 2020) only root may read ``energy_uj``: for anyone else nothing is counted.

A package counts everything that ran on it - other processes included - so on a busy machine RAPL's figure is
not the measurement's alone; the foreign-load reading over the same stretch says how busy it was. A stretch
shorter than `MIN_SECONDS` is not read: NVML's counter advances in steps of tens of milliseconds.

A trial's interpreter imports this module, so it uses the standard library only (and torch and pynvml on CUDA).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ablate.trial import metrics as metric

POWERCAP = Path("/sys/class/powercap")
RAPL, NVML = "RAPL", "NVML"  # the counters, as `metric.ENERGY_COUNTERS` codes them
MIN_SECONDS = 1.0  # as the foreign load's (`ablate.trial.foreign_load`): a shorter stretch is not read
_PACKAGE = re.compile(r"intel-rapl:\d+")  # a top-level domain; intel-rapl:0:0 is a subdomain of intel-rapl:0


@dataclass(frozen=True)
class Reading:
    """Every counter of one source, in joules, when read; `wrap_j` is where each wraps to zero (inf: never)."""

    wall: float
    joules: tuple[float, ...]
    wrap_j: tuple[float, ...]


@dataclass(frozen=True)
class Meter:
    """One source's counters: `read` returns None once they cannot be read; `close` releases what reading held."""

    counter: str  # RAPL or NVML
    read: Callable[[float], Reading | None]  # the wall time (time.perf_counter()) is the reading's own
    close: Callable[[], None] = lambda: None


def meter(device_type: str, index: int | None = None, powercap: Path | None = None) -> Meter | None:
    """The counter of the device a trial trains on (`index`: its CUDA index, None for the current device), or None
    where nothing counts it; `powercap` is where RAPL's counters are (`POWERCAP`)."""
    return _nvml(index) if device_type == "cuda" else _rapl(powercap or POWERCAP)


def joules_between(before: Reading | None, after: Reading | None) -> float | None:
    """The joules counted from `before` to `after`, a counter that went down having wrapped once; None when either
    could not be read."""
    if before is None or after is None or len(before.joules) != len(after.joules):
        return None
    return sum(b1 - b0 if b1 >= b0 else b1 + wrap - b0
               for b0, b1, wrap in zip(before.joules, after.joules, after.wrap_j))


def _rapl(root: Path) -> Meter | None:
    """The processor packages' RAPL counters under `root`, or None where there are none or they cannot be read."""
    try:
        domains = sorted(d for d in root.iterdir() if _PACKAGE.fullmatch(d.name)
                         and (d / "name").read_text().startswith("package"))
        wrap_j = tuple(int((d / "max_energy_range_uj").read_text()) / 1e6 for d in domains)
    except (OSError, ValueError):
        return None

    def read(wall: float) -> Reading | None:
        try:
            return Reading(wall, tuple(int((d / "energy_uj").read_text()) / 1e6 for d in domains), wrap_j)
        except (OSError, ValueError):  # root only since Linux 5.10
            return None
    return Meter(RAPL, read) if domains and read(0.0) is not None else None


def _nvml(index: int | None) -> Meter | None:
    """The NVML energy counter of CUDA device `index`, or None where it cannot be read."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no driver, no library
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(_pci_address(index))
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # raises NVMLError_NotSupported before Volta
    except (pynvml.NVMLError, AttributeError):  # AttributeError: a torch without the PCI address
        pynvml.nvmlShutdown()
        return None

    def read(wall: float) -> Reading | None:
        try:
            return Reading(wall, (pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3,), (math.inf,))
        except pynvml.NVMLError:
            return None
    return Meter(NVML, read, pynvml.nvmlShutdown)


def _pci_address(index: int | None) -> str:
    """CUDA device `index`'s PCI address, as NVML and sysfs write it ("0000:3b:00.0")."""
    import torch

    props: Any = torch.cuda.get_device_properties(index)  # the PCI fields are missing from torch's stubs
    return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


@dataclass
class Tally:
    """The joules of the timed windows: from `open` to `close`, less each stretch from `pause` to `resume`."""

    meter: Meter | None
    joules: float | None = None  # set by `close`: None where nothing was counted
    _opened: Reading | None = None
    _paused: Reading | None = None
    _excluded: float | None = 0.0  # None once a paused stretch could not be read

    def _now(self, wall: float) -> Reading | None:
        return self.meter.read(wall) if self.meter else None

    def open(self, wall: float) -> None:
        self._opened = self._now(wall)

    def pause(self, wall: float) -> None:
        self._paused = self._now(wall)

    def resume(self, wall: float) -> None:
        between = joules_between(self._paused, self._now(wall))
        self._excluded = None if between is None or self._excluded is None else self._excluded + between

    def close(self, wall: float) -> None:
        """Read the counter a last time and release it; call once, as the last window closes."""
        if self.meter is None:
            return
        opened, closed = self._opened, self._now(wall)
        self.meter.close()
        total = joules_between(opened, closed)
        if total is not None and self._excluded is not None and opened and closed \
                and closed.wall - opened.wall >= MIN_SECONDS:
            self.joules = max(0.0, total - self._excluded)

    def metrics(self, samples: int) -> dict[str, float]:
        """Joules per sample over the windows, and the counter's code; nothing where nothing was counted."""
        if self.joules is None or self.meter is None or samples <= 0:
            return {}
        return {metric.ENERGY_J_PER_SAMPLE: self.joules / samples,
                metric.ENERGY_COUNTER: metric.ENERGY_COUNTERS[self.meter.counter]}

"""Energy over the timed windows (ablate.trial.energy), read through fakes: a powercap folder laid out as Linux lays it
out, and a stand-in for nvidia-ml-py's `pynvml` that refuses what NVML refuses."""
from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ablate.trial import energy
from ablate.trial import metrics as metric

MAX_UJ = 262_143_328_850  # a package's max_energy_range_uj, as an Intel Xeon reports it


def _domain(root: Path, folder: str, name: str, uj: int, max_uj: int = MAX_UJ) -> None:
    (root / folder).mkdir(parents=True, exist_ok=True)
    for file, text in (("name", name), ("energy_uj", uj), ("max_energy_range_uj", max_uj)):
        (root / folder / file).write_text(f"{text}\n")


def _powercap(root: Path, package0_uj: int, package1_uj: int) -> Path:
    """Two packages; inside package 0 its core subdomain; a platform (psys) domain that holds both; the MMIO
    interface to package 0, a second door to the same counter; and another kind of powercap zone."""
    _domain(root, "intel-rapl:0", "package-0", package0_uj)
    _domain(root, "intel-rapl:1", "package-1", package1_uj)
    _domain(root, "intel-rapl:0:0", "core", package0_uj // 2)  # a subdomain: inside package 0 already
    _domain(root, "intel-rapl:2", "psys", 10 * (package0_uj + package1_uj))  # the platform: packages included
    _domain(root, "intel-rapl-mmio:0", "package-0", package0_uj)  # the same package through MMIO
    (root / "dtpm").mkdir(exist_ok=True)
    return root


def test_rapl_sums_the_packages_alone_and_reads_a_wrapped_counter_as_one_wrap(tmp_path: Path):
    meter = energy.meter("cpu", powercap=_powercap(tmp_path, 1_000_000, MAX_UJ - 500_000))
    assert meter is not None and meter.counter == energy.RAPL
    before = meter.read(0.0)
    _powercap(tmp_path, 4_000_000, 1_500_000)  # package 0: +3 J; package 1 wrapped past its range: +2 J
    after = meter.read(2.0)
    assert before is not None and after is not None and len(after.joules) == 2  # neither core, psys nor MMIO
    assert energy.joules_between(before, after) == pytest.approx(3.0 + 2.0)


def _refuse_reading_energy(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the kernel does for anyone but root since CVE-2020-8694: energy_uj is mode 0400, its read refused.
    (A chmod would not do: the tests may run as root, which reads it anyway.)"""
    read_text = Path.read_text

    def refusing(self: Path, *args, **kwargs) -> str:
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *args, **kwargs)
    monkeypatch.setattr(Path, "read_text", refusing)


def test_rapl_is_not_counted_where_there_is_none_or_it_may_not_be_read(tmp_path: Path, monkeypatch):
    assert energy.meter("cpu", powercap=tmp_path / "absent") is None
    empty = tmp_path / "empty"
    empty.mkdir()
    assert energy.meter("cpu", powercap=empty) is None
    root = _powercap(tmp_path / "rapl", 1_000_000, 2_000_000)
    _refuse_reading_energy(monkeypatch)
    assert energy.meter("cpu", powercap=root) is None


class FakeNVML(types.ModuleType):
    """nvidia-ml-py's `pynvml` as far as ablate calls it, refusing what NVML refuses: any call before `nvmlInit` or
    after as many `nvmlShutdown`s (NVMLError_Uninitialized, raised by the real module when its library is not
    loaded and by the library after shutdown), a bus id no GPU has (NVMLError_NotFound), and the energy counter
    of a GPU without one (NVMLError_NotSupported: before Volta). Errors are subclasses of NVMLError, as there.

    `gpus` maps PCI addresses to each GPU's counter readings, in millijoules, one per call; None: no counter."""

    def __init__(self, gpus: dict[str, list[int] | None]) -> None:
        super().__init__("pynvml")
        self.gpus, self.inits, self.calls = gpus, 0, []

        class NVMLError(Exception):
            pass
        self.NVMLError = NVMLError
        self.NVMLError_Uninitialized = type("NVMLError_Uninitialized", (NVMLError,), {})
        self.NVMLError_NotFound = type("NVMLError_NotFound", (NVMLError,), {})
        self.NVMLError_NotSupported = type("NVMLError_NotSupported", (NVMLError,), {})

    def _initialised(self, call: str) -> None:
        self.calls.append(call)
        if not self.inits:
            raise self.NVMLError_Uninitialized()

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self._initialised("nvmlShutdown")
        self.inits -= 1

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str | bytes) -> str:
        self._initialised("nvmlDeviceGetHandleByPciBusId")
        bus_id = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
        if bus_id not in self.gpus:
            raise self.NVMLError_NotFound()
        return bus_id

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        self._initialised("nvmlDeviceGetTotalEnergyConsumption")
        readings = self.gpus[handle]
        if readings is None:
            raise self.NVMLError_NotSupported()
        return readings.pop(0)


def _cuda_device_at(monkeypatch: pytest.MonkeyPatch, bus: int) -> None:
    """CUDA device 0 on PCI bus `bus` (its properties as torch.cuda reports them)."""
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=bus, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)


def test_nvml_reads_the_trials_gpu_found_by_its_pci_address_not_its_index(monkeypatch):
    # cuda:0 is NVML's second GPU (CUDA_VISIBLE_DEVICES=1, or CUDA's fastest-first order): read by its address.
    fake = FakeNVML({"0000:18:00.0": [0, 0, 0], "0000:3b:00.0": [5_000, 5_000, 7_500]})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    _cuda_device_at(monkeypatch, 0x3B)
    meter = energy.meter("cuda", 0)
    assert meter is not None and meter.counter == energy.NVML
    assert energy.joules_between(meter.read(0.0), meter.read(3.0)) == pytest.approx(2.5)  # mJ read as J
    meter.close()
    assert fake.inits == 0 and fake.calls[0] == "nvmlInit"  # initialised first, shut down at the end
    with pytest.raises(fake.NVMLError_Uninitialized):  # and the stand-in refuses what NVML refuses
        fake.nvmlDeviceGetTotalEnergyConsumption("0000:3b:00.0")


def test_nvml_is_not_counted_without_a_counter_a_gpu_or_the_package(monkeypatch):
    _cuda_device_at(monkeypatch, 0x3B)
    unsupported = FakeNVML({"0000:3b:00.0": None})  # a GPU before Volta
    monkeypatch.setitem(sys.modules, "pynvml", unsupported)
    assert energy.meter("cuda", 0) is None
    assert unsupported.inits == 0  # what it initialised, it shut down
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML({"0000:18:00.0": [0]}))  # the trial's GPU is not there
    assert energy.meter("cuda", 0) is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed: `import pynvml` fails
    assert energy.meter("cuda", 0) is None


class SteadyMeter:
    """A counter drawing `watts` on a clock the test moves; its `unreadable` readings (counted from 1) fail."""

    def __init__(self, watts: float, unreadable: frozenset[int] = frozenset()) -> None:
        self.watts, self.readings, self.unreadable, self.closed = watts, 0, unreadable, False

    def read(self, wall: float) -> energy.Reading | None:
        self.readings += 1
        if self.readings in self.unreadable:
            return None
        return energy.Reading(wall, (self.watts * wall,), (float("inf"),))

    def meter(self) -> energy.Meter:
        return energy.Meter(energy.NVML, self.read, lambda: setattr(self, "closed", True))


def test_a_tally_counts_the_windows_less_what_an_evaluation_inside_them_spent():
    steady = SteadyMeter(watts=100.0)
    tally = energy.Tally(steady.meter())
    tally.open(10.0)
    tally.pause(12.0)  # an evaluation from 12 s to 40 s: not the windows' energy
    tally.resume(40.0)
    tally.close(45.0)
    assert tally.joules == pytest.approx(100.0 * (45 - 10 - 28)) and steady.closed
    assert tally.metrics(70) == {metric.ENERGY_J_PER_SAMPLE: pytest.approx(10.0),
                                 metric.ENERGY_COUNTER: metric.ENERGY_COUNTERS["NVML"]}


@pytest.mark.parametrize("case", ["no counter", "too short", "unreadable at the close", "unreadable in a pause"])
def test_a_tally_claims_nothing_it_could_not_count(case):
    unreadable = {"unreadable at the close": {2}, "unreadable in a pause": {3}}.get(case, set())  # open: 1
    steady = SteadyMeter(100.0, frozenset(unreadable))
    tally = energy.Tally(None if case == "no counter" else steady.meter())
    tally.open(0.0)
    if case == "unreadable in a pause":
        tally.pause(1.0)
        tally.resume(2.0)
    tally.close(energy.MIN_SECONDS / 2 if case == "too short" else 5.0)
    assert tally.joules is None and tally.metrics(100) == {}
    assert steady.closed is (case != "no counter")  # released all the same

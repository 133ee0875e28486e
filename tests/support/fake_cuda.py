"""CPU stand-ins for CUDA that refuse what CUDA refuses, so a CUDA-only bug fails CI on a machine without a GPU.

Each fake does what PyTorch's own code does where that can be done honestly without a GPU, and says so:
- `FakeCUDA.set_device` validates its argument with PyTorch's own `torch.cuda._utils._get_device_index`
  (the function `torch.cuda.set_device` calls), so an index-less ``torch.device("cuda")`` raises the same
  ValueError; it then records the index instead of creating a CUDA context, which a CPU cannot. Its
  `get_device_name` and `get_device_capability` refuse as `torch.cuda.get_device_properties` does: an index-less
  device or None is the current one, a CPU device a ValueError, an index outside the devices an AssertionError.
- `GraphPool` plays a CUDA-graph tree's memory pool: the backward's gradient outputs are views of one buffer
  that the next forward (a replay) overwrites. It does not capture or replay kernels; it reproduces only the
  memory contract (outputs live until the next replay), which is what the zero-filled-gradient crash
  (pytorch#169545) comes from. Real cudagraph trees raise on access; this one fills NaN, which a comparison of
  weights catches as surely.
- `FakeAllocator` plays the CUDA caching allocator's statistics as `torch.cuda` reads them (c10's
  CUDACachingAllocator): freed blocks stay reserved until `empty_cache`, which releases no block in use and no
  pool a CUDA graph holds; `reset_peak_memory_stats` sets every peak, allocated and reserved, to its current level;
  a graph's recording reserves its private pool and its replays pass through no allocator at all (the
  CUDAGraphNode docstring in torch/_inductor/cudagraph_trees.py). Each call takes its device as PyTorch's does
  (`_get_device_index(device, optional=True)`), so it needs `FakeCUDA` installed for an index-less device, and
  refuses an index outside `torch.cuda.device_count()` as the allocator (memory statistics) and
  `torch.cuda.device` (synchronize) do.
- `FakeEvents` plays `torch.cuda.Event` on a host clock, refusing what c10's CUDAEvent::elapsed_time refuses: an
  event made without ``enable_timing`` or not yet recorded (ValueError), and one not yet complete (RuntimeError); an
  event completes only once the device is synchronised (`torch.cuda.synchronize`, or its own `synchronize`). Its
  device keeps up with the host: an event completes at the host time it was recorded.
- `FakeTrace` plays ``torch.profiler.profile(activities=[CUDA])``: the device work a test runs while it records,
  read back as kineto's events. As PyTorch's, its `profiler` is None before `start()`, its `kineto_results` None
  before `stop()`, and kineto refuses a second trace while one records.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import pytest
import torch
from torch.autograd import DeviceType


class FakeCUDA:
    """`count` CUDA devices named `name` of compute capability `capability`, the current one `current`;
    `set_to` records what `set_device` was asked for, `asked` the devices whose properties were read."""

    NAME = "NVIDIA H100 80GB HBM3"

    def __init__(self, count: int = 2, current: int = 0, name: str = NAME,
                 capability: tuple[int, int] = (9, 0)) -> None:
        self.count, self.current, self.name, self.capability = count, current, name, capability
        self.set_to: list[int] = []
        self.asked: list[int] = []

    def _properties(self, device: object) -> int:
        """The device index `torch.cuda.get_device_properties` reads, refused as it refuses."""
        index = torch.cuda._utils._get_device_index(device, optional=True)
        if index < 0 or index >= self.count:
            raise AssertionError("Invalid device id")
        self.asked.append(index)
        return index

    def get_device_name(self, device: object = None) -> str:
        self._properties(device)
        return self.name

    def get_device_capability(self, device: object = None) -> tuple[int, int]:
        self._properties(device)
        return self.capability

    def set_device(self, device: object) -> None:
        index = torch.cuda._utils._get_device_index(device)  # PyTorch's own refusal of "cuda" without an index
        if index >= self.count:
            raise RuntimeError("CUDA error: invalid device ordinal")  # what cudaSetDevice reports
        if index >= 0:
            self.current = index
            self.set_to.append(index)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeCUDA:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.count)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: self.current)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_device)
        monkeypatch.setattr(torch.cuda, "get_device_name", self.get_device_name)
        monkeypatch.setattr(torch.cuda, "get_device_capability", self.get_device_capability)
        return self


class FakeAllocator:
    """The caching allocator's levels in MiB: `allocated` (tensors), `reserved` (blocks held from the device), and
    their peaks; `pools` is what CUDA graphs' private pools hold."""

    MB = 2**20

    def __init__(self) -> None:
        self.allocated = self.reserved = self.pools = 0.0
        self.peak_allocated = self.peak_reserved = 0.0
        self.emptied = 0  # empty_cache calls
        self.synchronized = 0

    def allocate(self, mb: float) -> None:
        """A tensor of `mb`: served from free reserved blocks, else from new ones."""
        self.allocated += mb
        self.reserved = max(self.reserved, self.allocated + self.pools)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def free(self, mb: float) -> None:
        self.allocated -= mb  # the block goes back to the cache: still reserved

    def record_graph(self, mb: float) -> None:
        """A CUDA graph recorded with `mb` of activations: its private pool is reserved, and stays so; the tensors
        it allocated while recording are the pool's, so the allocated level ends where it began."""
        self.pools += mb
        self.allocate(mb)
        self.free(mb)

    def replay(self) -> None:
        """A replay: the kernels write into the pool; no allocation, no statistic moves."""

    # The torch.cuda functions, as they behave.
    def _device(self, device: object) -> int:
        """The index the allocator's statistics are read for, refused as c10's CUDACachingAllocator refuses."""
        index = torch.cuda._utils._get_device_index(device, optional=True)
        if not 0 <= index < torch.cuda.device_count():
            raise RuntimeError(f"Invalid device argument {index}: did you call init?")
        return index

    def max_memory_allocated(self, device: object = None) -> int:
        self._device(device)
        return int(self.peak_allocated * self.MB)

    def max_memory_reserved(self, device: object = None) -> int:
        self._device(device)
        return int(self.peak_reserved * self.MB)

    def reset_peak_memory_stats(self, device: object = None) -> None:
        self._device(device)
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def empty_cache(self) -> None:
        self.emptied += 1
        self.reserved = self.allocated + self.pools  # blocks in use, and pools a graph holds, stay

    def synchronize(self, device: object = None) -> None:
        # Under `torch.cuda.device(device)`: a negative index leaves the current device, one too high is refused.
        if torch.cuda._utils._get_device_index(device, optional=True) >= torch.cuda.device_count():
            raise RuntimeError("CUDA error: invalid device ordinal")
        self.synchronized += 1

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeAllocator:
        for name in ("max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats", "empty_cache",
                     "synchronize"):
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))
        return self


class GraphPool(torch.nn.Module):
    """`inner` run so that its parameters' gradients come back as views of a pool the next forward overwrites."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.names = [name for name, _ in inner.named_parameters()]
        self.pool = torch.empty(sum(p.numel() for p in inner.parameters()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Replay.apply(self, x, *self.inner.parameters())


class _Replay(torch.autograd.Function):
    @staticmethod
    def forward(ctx, owner: GraphPool, x: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        owner.pool.fill_(float("nan"))  # a replay reuses the pool: whatever still points into it is overwritten
        ctx.owner = owner
        ctx.save_for_backward(x, *params)
        return torch.func.functional_call(owner.inner, dict(zip(owner.names, params)), (x,))

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, *params = ctx.saved_tensors
        owner = ctx.owner
        with torch.enable_grad():
            leaves = [p.detach().requires_grad_() for p in params]
            out = torch.func.functional_call(owner.inner, dict(zip(owner.names, leaves)), (x,))
            grads = torch.autograd.grad(out, leaves, grad_out)
        views, offset = [], 0
        for grad in grads:  # the graph's static outputs: views of the pool, handed to autograd as they are
            view = owner.pool[offset:offset + grad.numel()].view_as(grad)
            view.copy_(grad)
            views.append(view)
            offset += grad.numel()
        return (None, None, *views)


class FakeEvents:
    """`torch.cuda.Event` and a `torch.cuda.synchronize` that completes every recorded event (see the docstring)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now, self.pending, self.recorded = now, [], 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeEvents:
        """Install after `FakeAllocator`, whose `synchronize` this one calls."""
        fake, synchronize = self, torch.cuda.synchronize

        class Event:
            def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                         external: bool = False) -> None:
                self.timing, self.at, self.complete = enable_timing, None, False

            def record(self, stream: object = None) -> None:
                self.at, self.complete = fake.now(), False
                fake.pending.append(self)
                fake.recorded += 1

            def query(self) -> bool:
                return self.at is None or self.complete  # an event never recorded has nothing to wait for

            def synchronize(self) -> None:
                self.complete = self.at is not None

            def elapsed_time(self, end: Event) -> float:
                if not (self.timing and end.timing):
                    raise ValueError("Both events must be created with argument 'enable_timing=True'.")
                if self.at is None or end.at is None:
                    raise ValueError("Both events must be recorded before calculating elapsed time.")
                if not (self.query() and end.query()):
                    raise RuntimeError("Both events must be completed before calculating elapsed time.")
                return 1000.0 * (end.at - self.at)

        def synchronize_all(device: object = None) -> None:
            synchronize(device)
            for event in fake.pending:
                event.complete = True
            fake.pending.clear()

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "synchronize", synchronize_all)
        return self


class FakeTrace:
    """What a kernel trace records: `run` device work while one records; `cupti` False: CUDA is no supported
    activity (PyTorch built or installed without CUPTI)."""

    def __init__(self, cupti: bool = True, typed: bool = True) -> None:
        # typed False: torch before kineto's events named their activity type (2.11): annotations are flagged
        self.cupti, self.typed, self.recording, self.traces = cupti, typed, None, 0

    def run(self, start_s: float, end_s: float, activity: str = "kernel", device: int = 0,
            device_type: DeviceType = DeviceType.CUDA) -> None:
        """Device work from `start_s` to `end_s` (seconds on the test's clock); kept only while a trace records."""
        if self.recording is not None:
            kind = ({"activity_type": lambda: activity} if self.typed
                    else {"is_user_annotation": lambda: activity == "gpu_user_annotation"})
            self.recording.append(SimpleNamespace(
                start_ns=lambda: round(start_s * 1e9), end_ns=lambda: round(end_s * 1e9),
                device_index=lambda: device, device_type=lambda: device_type, **kind))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeTrace:
        from torch.profiler import ProfilerActivity

        fake = self

        class Profile:
            def __init__(self, activities: list[ProfilerActivity]) -> None:
                self.activities, self.profiler = activities, None

            def start(self) -> None:
                if fake.recording is not None:
                    raise RuntimeError("Profiler is already enabled on this thread")
                fake.recording, fake.traces = [], fake.traces + 1
                self.profiler = SimpleNamespace(kineto_results=None)

            def stop(self) -> None:
                events, fake.recording = fake.recording, None
                assert self.profiler is not None and events is not None
                self.profiler.kineto_results = SimpleNamespace(events=lambda: list(events))

        supported = {ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if self.cupti else [])}
        monkeypatch.setattr(torch.profiler, "profile", Profile)
        monkeypatch.setattr(torch.profiler, "supported_activities", lambda: supported)
        return self

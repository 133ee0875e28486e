"""Peak memory of a trial's timed windows, and the device calls that reset and read it.

Peak memory covers the timed windows only: the peak is reset when the first
window opens (so compilation and warm-up allocations do not count), and an
evaluation that falls inside the windows is left out (the peak so far is kept,
and reset after it), so a trial that evaluates for accuracy reads the same as
one that borrows the accuracy. On a CPU it is the process's resident set size
(Linux; elsewhere the peak over the whole trial). On CUDA both of the caching
allocator's peaks are recorded, allocated (what tensors held) and reserved
(what the allocator held from the device), and the table shows the reserved
one: CUDA-graph replays (`cuda_graphs`, `compile` in reduce-overhead or
max-autotune mode) run in a private pool without passing through the
allocator (torch/_inductor/cudagraph_trees.py, CUDAGraphNode), so the
allocated peak leaves their activations out and would show graphs as a
saving. The reserved peak never falls by itself (the allocator keeps freed
blocks), so the cache is emptied once before the windows - at the third step,
after compilation, graph recording and cuDNN's autotuning, leaving the
warm-up to re-reserve what a step needs (or as the first window opens, after
a shorter warm-up) - and after each evaluation before the windows end (for
one inside a window, the re-reservation, a few cudaMallocs, falls in it).
"""
from __future__ import annotations

import resource

import torch

from ablate.trial import metrics as metric

_STATUS, _CLEAR_REFS = "/proc/self/status", "/proc/self/clear_refs"


def highest(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Each peak's higher reading of two (the keys of `peak_memory`)."""
    return {k: max(a.get(k, 0.0), b.get(k, 0.0)) for k in {**a, **b}}


def peak_memory(device: torch.device) -> dict[str, float]:
    """The peaks since the last reset, by metric key. CUDA: allocated and reserved, and the reserved one as the
    figure the table shows, marked so (see the module docstring); CPU: the resident set (`peak_memory_mb`)."""
    if device.type != "cuda":
        return {metric.PEAK_MEMORY_MB: peak_memory_mb(device)}
    reserved = torch.cuda.max_memory_reserved(device) / 2**20
    return {metric.PEAK_MEMORY_MB: reserved, metric.PEAK_MEMORY_RESERVED_MB: reserved,
            metric.PEAK_MEMORY_ALLOCATED_MB: torch.cuda.max_memory_allocated(device) / 2**20,
            metric.PEAK_MEMORY_IS_RESERVED: 1.0}


def empty_cache(device: torch.device) -> None:
    """CUDA: hand the caching allocator's free blocks back to the device, so its reserved level is what is held now
    (blocks in use stay, CUDA-graph pools too: PyTorch releases only a pool no graph holds). CPU: nothing."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def reset_peak_memory(device: torch.device) -> None:
    """CUDA: start new peaks (allocated and reserved: `reset_peak_memory_stats` resets every "peak" statistic) from
    what is held now. CPU on Linux: the same for the resident set (writing 5 to /proc/self/clear_refs sets the
    process's high-water mark to its current size, proc(5)); elsewhere nothing."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open(_CLEAR_REFS, "w") as refs:
            refs.write("5")
    except OSError:  # not Linux, or a kernel before 4.0: the peak stays the whole process's
        pass


def peak_memory_mb(device: torch.device) -> float:
    """CUDA: the caching allocator's reserved peak (`peak_memory`). CPU: this process's peak resident set size,
    Linux's VmHWM where there is one. Why not getrusage's ru_maxrss: the kernel carries the high-water mark of the
    image an interpreter was exec'ed from into it, so a trial started by the study process read the study's own
    peak (995 MB for every combination of mnist_cnn on a CPU)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_reserved(device) / 2**20
    try:
        with open(_STATUS) as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB

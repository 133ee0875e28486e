"""Model FLOPs utilisation: the model's training FLOPs per second as a fraction of the device's peak.

The peak is the device's dense (no sparsity) BF16 tensor-core rate from
NVIDIA's datasheets, whatever precision a combination runs in - so fp32,
bf16 and float8 combinations are read on one scale, as PaLM's MFU is
(Chowdhery et al. 2022, appendix B). Devices not listed (CPUs among them: no
published peak fits a shared VM) get no MFU, and the report says so.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    tflops: float
    source: str


# (words that must all be in torch.cuda.get_device_name(), peak); the first match wins, so variants come first.
_PEAKS: tuple[tuple[tuple[str, ...], Peak], ...] = (
    (("H100", "PCIe"), Peak(756.0, "NVIDIA H100 datasheet, H100 PCIe: BF16 1,513 TFLOPS with sparsity, half dense")),
    (("H100", "NVL"), Peak(835.5, "NVIDIA H100 datasheet, H100 NVL: BF16 1,671 TFLOPS with sparsity, half dense")),
    (("H100",), Peak(989.5, "NVIDIA H100 datasheet, H100 SXM: BF16 1,979 TFLOPS with sparsity, half dense")),
    (("H200", "NVL"), Peak(835.5, "NVIDIA H200 datasheet, H200 NVL: BF16 1,671 TFLOPS with sparsity, half dense")),
    (("H200",), Peak(989.5, "NVIDIA H200 datasheet, H200 SXM: BF16 1,979 TFLOPS with sparsity, half dense")),
    (("A100",), Peak(312.0, "NVIDIA A100 datasheet: BF16 312 TFLOPS dense (624 with sparsity)")),
)


def peak(device_name: str) -> Peak | None:
    """The dense BF16 peak of a CUDA device by its name, or None when it is not known here."""
    return next((p for words, p in _PEAKS if all(w in device_name for w in words)), None)


def utilisation(tokens_per_s: float, flops_per_token: float, device_name: str) -> float | None:
    """MFU as a fraction (0.42 is 42%), or None without a known peak."""
    known = peak(device_name)
    return None if known is None else tokens_per_s * flops_per_token / (known.tflops * 1e12)

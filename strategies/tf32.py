"""TF32: TensorFloat-32 tensor-core math for fp32 matmuls and convolutions on CUDA."""
from __future__ import annotations

import torch
from typing_extensions import override

from strategies.base import Strategy, capability_reason, cuda_reason

PRECISIONS = ("ieee", "tf32")


def set_fp32_precision(precision: str) -> None:
    """Process-wide: fp32 matmuls and cuDNN convolutions in strict IEEE fp32 ("ieee") or TF32 ("tf32").

    PyTorch's own defaults differ between the two (matmuls strict, cuDNN
    convolutions TF32), so a baseline that claims true fp32 must call this
    with "ieee" first.

    Through the long-standing ``allow_tf32`` flags only: PyTorch 2.9 added
    ``fp32_precision`` settings, and once those are set the legacy getters
    (``torch.get_float32_matmul_precision()``, which Inductor's max-autotune
    calls, and ``matmul.allow_tf32``) raise "mix of the legacy and new APIs".
    Setting the legacy flags keeps both getters, old and new, consistent.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"fp32 precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"


def fp32_precision() -> str:
    """The current setting, as "matmul=<p> conv=<p>" (for reports)."""
    name = {True: "tf32", False: "ieee"}
    return f"matmul={name[torch.backends.cuda.matmul.allow_tf32]} conv={name[torch.backends.cudnn.allow_tf32]}"


class TF32(Strategy):
    """Lets CUDA run fp32 matmuls and convolutions on tensor cores in TF32.

    TF32 keeps fp32's 8-bit exponent but rounds the inputs' mantissa to 10
    bits, and runs on Ampere-and-newer tensor cores at up to 8x the fp32 rate;
    accumulation stays fp32. Helps compute-bound fp32 models (ResNets,
    transformers) on compute capability >= 8.0 without touching the code or
    the dtypes; accuracy is usually indistinguishable. Does nothing on CPUs,
    on older GPUs, under AMP or HalfPrecision (those ops already run in half),
    or for launch-bound small models. The setting is process-wide and set in
    `prepare_model`; PyTorch's default already uses TF32 for cuDNN
    convolutions, so compare against a baseline set to strict fp32 with
    `set_fp32_precision("ieee")`.
    """

    name = "tf32"
    changes_numerics = True

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        set_fp32_precision("tf32")
        return model

    @override
    def check(self, device: torch.device | str) -> str | None:
        return cuda_reason(device, "TensorFloat-32") or capability_reason(device, (8, 0), "TensorFloat-32")

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

    Every getter must read the setting, old and new, for code of either age
    reads one or the other: Inductor's Triton convolution templates read
    ``torch.backends.cudnn.fp32_precision`` (torch/_inductor/kernel/conv.py)
    and its matmul FLOP estimates ``torch.backends.cuda.matmul.fp32_precision``;
    its FX-graph cache key and max-autotune's benchmark cache call
    ``torch.get_float32_matmul_precision()``. Neither API alone keeps both
    kinds consistent (PyTorch's Context.cpp, read on 2.14):

    - the legacy ``allow_tf32`` flags set the per-operator precisions
      (``matmul``, ``cudnn.conv``, ``cudnn.rnn``) but not cuDNN's own
      ``cudnn.fp32_precision``, which stays "none": Inductor's convolution
      templates then ran TF32 convolutions in IEEE;
    - the new ``fp32_precision`` setters alone leave the legacy state behind,
      and the legacy getters (``get_float32_matmul_precision``,
      ``matmul.allow_tf32``, ``cudnn.allow_tf32``) raise "mix of the legacy
      and new APIs".

    So: the legacy flags first, then, where the running PyTorch has the
    ``fp32_precision`` API (2.9 and later), every one of its settings to the
    same value. On an older PyTorch the legacy flags are the only API, and
    all there is to read.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"fp32 precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    if has_fp32_precision_api():
        torch.backends.cuda.matmul.fp32_precision = precision
        torch.backends.cudnn.fp32_precision = precision
        # Module objects PyTorch swaps in at import (cudnn's `conv`, the `rnn` submodule's class): the stubs lack them.
        torch.backends.cudnn.conv.fp32_precision = precision  # type: ignore[attr-defined]
        torch.backends.cudnn.rnn.fp32_precision = precision  # type: ignore[attr-defined]


def has_fp32_precision_api() -> bool:
    """Whether this PyTorch has the ``fp32_precision`` settings (2.9 and later): matmul's, cuDNN's and its ops'."""
    cudnn = torch.backends.cudnn
    return (hasattr(torch.backends.cuda.matmul, "fp32_precision") and hasattr(cudnn, "fp32_precision")
            and hasattr(cudnn, "conv") and hasattr(cudnn, "rnn"))


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
    targets = frozenset({"compute"})  # fp32 matmuls and convolutions on tensor cores
    changes_numerics = True

    @override
    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        set_fp32_precision("tf32")
        return model

    @override
    def check(self, device: torch.device | str) -> str | None:
        return cuda_reason(device, "TensorFloat-32") or capability_reason(device, (8, 0), "TensorFloat-32")

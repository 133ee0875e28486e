"""The process's fp32-precision flags, saved and restored whole: tests share one process, trials do not.

PyTorch keeps two sets (the legacy ``allow_tf32`` flags and, since 2.9, the ``fp32_precision`` settings) that
must agree, or the legacy getters raise "mix of the legacy and new APIs"; `restore` sets them as
`strategies.set_fp32_precision` does, the legacy flags first.
"""
from __future__ import annotations

import torch

from strategies.tf32 import has_fp32_precision_api


def saved() -> dict[str, object]:
    b = torch.backends
    flags: dict[str, object] = {"matmul.allow_tf32": b.cuda.matmul.allow_tf32, "cudnn.allow_tf32": b.cudnn.allow_tf32}
    if has_fp32_precision_api():
        flags.update({"matmul": b.cuda.matmul.fp32_precision, "cudnn": b.cudnn.fp32_precision,
                      "conv": b.cudnn.conv.fp32_precision, "rnn": b.cudnn.rnn.fp32_precision})
    return flags


def restore(flags: dict[str, object]) -> None:
    b = torch.backends
    b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = flags["matmul.allow_tf32"], flags["cudnn.allow_tf32"]
    if "matmul" in flags:
        b.cuda.matmul.fp32_precision = flags["matmul"]
        b.cudnn.fp32_precision = flags["cudnn"]
        b.cudnn.conv.fp32_precision = flags["conv"]
        b.cudnn.rnn.fp32_precision = flags["rnn"]

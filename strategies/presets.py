"""Presets: named bundles of strategies - the four classic mixed-precision levels, and float8 as it is trained.

The first four are NVIDIA Apex's optimisation levels, which the literature still uses:

    O0  pure fp32                                         (no strategy: the baseline)
    O1  autocast: fp16 per op, fp32 weights, loss scaling AMP("fp16")
    O2  fp16 weights, fp32 master weights, loss scaling   HalfPrecision("fp16", master_weights=True)
    O3  pure fp16: weights, activations, update           HalfPrecision("fp16")

The float8 ones are float8 training the way torchao and torchtitan run it, with ``torch.compile``, which fuses
the casts and scale reductions that make float8 alone rarely faster (see `strategies.float8`):

    float8_compile          tensorwise scaling, compiled  Float8("tensorwise"), Compile()
    float8_rowwise_compile  rowwise scaling, compiled     Float8("rowwise"), Compile()

A study space names a bundle as one choice (`{preset: float8_compile}`), which is how it measures float8 with
compile beside float8 alone without crossing compile with every other technique. ``preset("O2")`` is a `Stack`,
so it composes with anything else.
"""
from __future__ import annotations

from typing import Callable

from strategies.amp import AMP
from strategies.base import Strategy
from strategies.compile import Compile
from strategies.float8 import Float8
from strategies.half_precision import HalfPrecision
from strategies.stack import Stack, compose

PRESETS: dict[str, Callable[[], tuple[Strategy, ...]]] = {
    "O0": lambda: (),
    "O1": lambda: (AMP("fp16"),),
    "O2": lambda: (HalfPrecision("fp16", master_weights=True),),
    "O3": lambda: (HalfPrecision("fp16"),),
    "float8_compile": lambda: (Float8("tensorwise"), Compile()),
    "float8_rowwise_compile": lambda: (Float8("rowwise"), Compile()),
}


def preset(name: str) -> Stack:
    """A fresh stack of the strategies preset `name` bundles."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return compose(*PRESETS[name]())

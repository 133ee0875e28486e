"""TF32 switches one set of PyTorch flags, so every getter (old and new, Inductor's included) can read them."""
from __future__ import annotations

import pytest
import torch

from strategies import TF32, fp32_precision, set_fp32_precision


@pytest.fixture(autouse=True)
def _strict_fp32_after():
    yield
    set_fp32_precision("ieee")


@pytest.mark.parametrize("precision, matmul, allowed", [("tf32", "high", True), ("ieee", "highest", False)])
def test_every_getter_reads_the_setting(precision, matmul, allowed):
    set_fp32_precision(precision)
    # Inductor's max-autotune calls the first; both raised "mix of the legacy and new APIs" after the new setters.
    assert torch.get_float32_matmul_precision() == matmul
    assert torch.backends.cuda.matmul.allow_tf32 is allowed and torch.backends.cudnn.allow_tf32 is allowed
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # the API since PyTorch 2.9
        assert torch.backends.cuda.matmul.fp32_precision == precision
    assert fp32_precision() == f"matmul={precision} conv={precision}"


def test_the_strategy_sets_tf32():
    set_fp32_precision("ieee")
    TF32().prepare_model(torch.nn.Linear(2, 2))
    assert torch.get_float32_matmul_precision() == "high"

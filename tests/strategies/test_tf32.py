"""TF32 switches one set of PyTorch flags, so every getter (old and new, Inductor's included) can read them."""
from __future__ import annotations

import pytest
import torch

from strategies import TF32, fp32_precision, set_fp32_precision
from strategies.tf32 import has_fp32_precision_api


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


@pytest.mark.parametrize("precision", ["tf32", "ieee"])
def test_the_current_api_reads_the_setting_too_inductors_convolution_getter_included(precision):
    if not has_fp32_precision_api():
        pytest.skip(f"torch {torch.__version__} has no fp32_precision settings: the legacy flags are all there is")
    set_fp32_precision(precision)
    # Inductor's Triton convolution templates read cuDNN's own setting (torch/_inductor/kernel/conv.py), which the
    # legacy flag leaves at "none": TF32 + max-autotune convolutions ran in IEEE.
    assert torch.backends.cudnn.fp32_precision == precision
    assert torch.backends.cudnn.conv.fp32_precision == torch.backends.cudnn.rnn.fp32_precision == precision
    assert torch.backends.cuda.matmul.fp32_precision == precision
    assert torch.get_float32_matmul_precision() == {"tf32": "high", "ieee": "highest"}[precision]  # no "mix" error
    assert torch.backends.cudnn.allow_tf32 is torch.backends.cuda.matmul.allow_tf32 is (precision == "tf32")


def test_switching_back_and_forth_keeps_every_getter_consistent():
    for precision in ("tf32", "ieee", "tf32", "ieee"):
        set_fp32_precision(precision)
        assert fp32_precision() == f"matmul={precision} conv={precision}"
        torch.get_float32_matmul_precision()  # raises on a mix of the two APIs


def test_a_torch_without_the_current_api_gets_the_legacy_flags_only(monkeypatch):
    from strategies import tf32

    touched = []
    monkeypatch.setattr(tf32, "has_fp32_precision_api", lambda: False)
    monkeypatch.setattr(type(torch.backends.cuda.matmul), "__setattr__",
                        lambda self, name, value: touched.append(name))
    set_fp32_precision("tf32")
    assert touched == ["allow_tf32"]

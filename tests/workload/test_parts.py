"""What a model is made of (`ablate.workload.parts`): the attention layers, 2-d convolutions and float8-convertible
Linear layers some techniques need, counted on the model built on the meta device."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ablate.workload.models import MODELS
from ablate.workload.parts import Parts, parts, parts_of


def test_the_bundled_models_parts():
    assert parts_of(MODELS["mnist_cnn"], {}) == Parts(attention=0, convolutions=2, float8_linears=1)  # 9216 -> 128
    gpt = parts_of(MODELS["byte_gpt"], {"seq_len": 32})
    assert gpt is not None and gpt.attention == 6 and gpt.convolutions == 0  # its blocks call SDPA themselves
    assert parts_of(MODELS["resnet18_cifar"], {}) == Parts(attention=0, convolutions=20, float8_linears=0)


class _CallsSdpa(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(x, x, x)


class CrossAttention(nn.Module):  # named for attention: a Hugging Face or timm layer that dispatches elsewhere
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_attention_is_a_multihead_layer_a_module_named_for_it_or_one_whose_forward_calls_sdpa():
    assert parts(nn.Sequential(nn.MultiheadAttention(16, 2))).attention == 1
    assert parts(nn.Sequential(CrossAttention())).attention == 1
    assert parts(nn.Sequential(_CallsSdpa())).attention == 1
    assert parts(nn.Sequential(nn.Linear(16, 16), nn.ReLU())).attention == 0


def test_float8_counts_only_the_linear_layers_whose_dimensions_are_multiples_of_16():
    found = parts(nn.Sequential(nn.Linear(32, 64), nn.Linear(64, 10), nn.Linear(30, 32), nn.Conv1d(3, 16, 3)))
    assert found == Parts(attention=0, convolutions=0, float8_linears=1)  # a 1-d convolution has no 4-d layout


def test_a_model_that_cannot_be_built_on_the_meta_device_has_no_parts_known():
    def reads_values() -> nn.Module:
        scale = torch.ones(3)
        return nn.Linear(16, 16 * int(scale.sum().item()))  # a meta tensor has no value to read

    assert parts_of(reads_values, {}) is None

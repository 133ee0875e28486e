"""Models a study can name, looked up by name in `MODELS`: the built-ins here, and library models by prefix
(``hf:llama``, ``timm:vit_tiny_patch16_224``, ``torchvision:resnet50``; see `ablate.workload.library_models`)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ablate.workload import library_models


class MnistCNN(nn.Module):
    """The classic PyTorch MNIST example network (pytorch/examples, mnist/main.py)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(self.dropout2(x))  # logits; the study's loss is cross-entropy


def resnet18_cifar(num_classes: int = 10) -> nn.Module:
    """torchvision's ResNet-18 for 32x32x3 images: a 3x3 stride-1 stem and no max-pool.

    The ImageNet stem (7x7 stride 2, then a max-pool) would shrink a 32x32
    image to 8x8 before the first block; the usual CIFAR adaptation keeps
    the full resolution there, which is also where most of the compute is.
    """
    from torchvision.models import resnet18

    model = resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then a 4x-wide GELU MLP, each added back."""

    def __init__(self, d_model: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        # (batch, seq, 3, heads, head_dim) -> three (batch, heads, seq, head_dim), the layout SDPA's kernels take.
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, self.n_head, width // self.n_head).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        # One call, so the AttentionBackend strategy (and PyTorch's own dispatch) picks the kernel: flash,
        # memory-efficient, cuDNN or the math reference.
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                  dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.proj(attended.transpose(1, 2).reshape(batch, seq, width)))
        return x + self.drop(self.mlp(self.norm2(x)))


class ByteGPT(nn.Module):
    """A small decoder-only transformer over bytes (vocabulary 256: no tokenizer), GPT-2's shape.

    Learned token and position embeddings, `n_layer` identical `Block`s in ``self.blocks`` (the
    repeated blocks that regional compilation and activation checkpointing find), a final norm and
    a head tied to the token embedding. Input (batch, seq) byte ids; output (batch, seq, 256) logits.
    """

    vocab = 256

    def __init__(self, seq_len: int = 256, n_layer: int = 6, n_head: int = 6, d_model: int = 384,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"ByteGPT: d_model ({d_model}) must be a multiple of n_head ({n_head})")
        self.seq_len, self.n_layer, self.d_model = seq_len, n_layer, d_model
        self.embed = nn.Embedding(self.vocab, d_model)
        self.position = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, dropout) for _ in range(n_layer))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, self.vocab, bias=False)
        self.head.weight = self.embed.weight  # tied, as in GPT-2: fewer parameters, no loss in quality
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)  # GPT-2's initialisation
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6 per weight (forward 2, backward 4) plus attention's score and value
        matmuls, 12 * layers * width * sequence (PaLM, Chowdhery et al. 2022, appendix B). Position
        embeddings are lookups, not matmuls, and are left out; the tied head counts once as a matmul."""
        weights = sum(p.numel() for p in self.parameters()) - self.position.weight.numel()
        return 6.0 * weights + 12.0 * self.n_layer * self.d_model * self.seq_len


class _Models(dict):
    """The built-in models by name; a library model's name (``hf:...``) is found too, its constructor made on
    demand, so every lookup of a study's model - the loader's and the trial's - takes either kind."""

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or library_models.is_library(name)

    def __missing__(self, name: str) -> Callable[..., nn.Module]:
        if library_models.is_library(name):
            return library_models.factory(name)  # ModelUnavailable (a LookupError) says why it cannot be had
        raise KeyError(name)


MODELS: dict[str, Callable[..., nn.Module]] = _Models({
    "mnist_cnn": MnistCNN,
    "resnet18_cifar": resnet18_cifar,
    "byte_gpt": ByteGPT,
})

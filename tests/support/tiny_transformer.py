"""A test-local decoder-only transformer of the shape the strategies' block convention expects.

Byte-level (vocabulary 256), pre-norm blocks of causal self-attention through
``F.scaled_dot_product_attention`` and an MLP, held in ``self.blocks`` - an
``nn.ModuleList`` of same-class blocks - so regional compilation and
activation checkpointing find them. Deterministic for a seed, tiny enough for
a CPU.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 256


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    def __init__(self, width: int = 32, heads: int = 2, depth: int = 2, context: int = 16) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(VOCAB, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def make_transformer(seed: int = 0, **kwargs: int) -> TinyTransformer:
    """A TinyTransformer whose weights depend only on `seed` (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyTransformer(**kwargs)


def make_text(n: int = 64, context: int = 16, seed: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` random byte sequences and their next-byte targets (the inputs shifted by one)."""
    data = torch.randint(0, VOCAB, (n, context + 1), generator=torch.Generator().manual_seed(seed))
    return data[:, :-1], data[:, 1:]


def next_byte_loss(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(inputs).flatten(0, 1).float(), targets.flatten())


def transformer_losses(stack, steps: int = 5, device: str = "cpu", seed: int = 0, lr: float = 1e-3,
                       **model_kwargs: int) -> list[float]:
    """Losses of `steps` Adam steps of a fresh TinyTransformer on fixed text, driven by the `stack`'s hooks only."""
    model = stack.prepare_model(make_transformer(seed, **model_kwargs).to(device))
    optimizer = stack.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=lr))
    inputs, targets = make_text(context=model_kwargs.get("context", 16))
    losses: list[float] = []
    for step in range(steps):
        batch = stack.to_device((inputs[step * 8:(step + 1) * 8], targets[step * 8:(step + 1) * 8]), device)
        with stack.autocast(device):
            loss = next_byte_loss(model, *batch)
        stack.backward(loss)
        stack.step(optimizer)
        losses.append(loss.item())
    return losses

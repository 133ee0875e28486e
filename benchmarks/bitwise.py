"""Which graph modes leave training bitwise as it is, on this machine: a fact an accuracy group could rest on.

    python -m benchmarks.bitwise [--steps 8] [--device cpu]

Trains the MNIST example CNN (`ablate.models`) for a few Adam steps from one
seed, with the same batches and the same dropout seed at every step, in eager
mode, under TorchScript and under torch.compile, and prints per mode whether
every loss and every weight equals eager's exactly, and the largest weight
difference. A mode that is bitwise equal here trains exactly as eager does for
this model and device, so it cannot change the accuracy; one that differs only
rounds differently, or draws its random numbers otherwise (Inductor's dropout).
"""
from __future__ import annotations

import argparse
from typing import Callable

import torch
import torch.nn.functional as F

from ablate.machine import describe
from ablate.models import MnistCNN
from strategies import Compile, TorchScript


def train(prepare: Callable[[torch.nn.Module], torch.nn.Module], steps: int, device: str
          ) -> tuple[list[float], list[torch.Tensor]]:
    batches = torch.Generator().manual_seed(0)
    data = [(torch.randn(64, 1, 28, 28, generator=batches), torch.randint(0, 10, (64,), generator=batches))
            for _ in range(steps)]
    torch.manual_seed(1)
    model = MnistCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    forward = prepare(model)
    losses = []
    for x, y in data:
        torch.manual_seed(2)  # the same dropout seed at every step, in every mode
        optimizer.zero_grad()
        loss = F.cross_entropy(forward(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu().clone() for p in model.parameters()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(f"{describe(args.device).device_name}, torch {torch.__version__}, {args.steps} Adam steps of 64:")
    losses, weights = train(lambda m: m, args.steps, args.device)
    for name, prepare in (("eager again", lambda m: m), ("torchscript", TorchScript().prepare_model),
                          ("compile", Compile().prepare_model)):
        mine, theirs = train(prepare, args.steps, args.device)
        same = mine == losses and all(torch.equal(a, b) for a, b in zip(theirs, weights))
        largest = max((a - b).abs().max().item() for a, b in zip(theirs, weights))
        print(f"  {name:<12} {'bitwise equal to eager' if same else 'differs'}: largest weight difference {largest:.3g}")


if __name__ == "__main__":
    main()

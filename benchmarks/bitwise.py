"""Which graph modes train bitwise as eager does on this machine: `ablate.run.bitwise`'s check, run by hand.

    python -m benchmarks.bitwise [--study mnist_cnn] [--device cpu]

For TorchScript and for torch.compile, trains the study's model for
`ablate.run.bitwise.STEPS` steps of the study's own loop, data and seed beside
eager (and eager beside itself, a control), and prints whether every weight,
buffer and loss equals eager's, and the largest weight difference. A study
runs this check itself for TorchScript, which may be bitwise equal; compile is
here to show why it is not checked (Inductor fuses kernels and draws its
dropout otherwise).
"""
from __future__ import annotations

import argparse

import torch

from ablate.config import study as studies
from ablate.config.choices import Option
from ablate.run import bitwise
from ablate.trial.machine import describe
from ablate.trial.process import TrialSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mnist_cnn")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    study = studies.load(args.study, args.device.split(":")[0])
    print(f"{describe(args.device).device_name}, torch {torch.__version__}, {study.name}: "
          f"{bitwise.STEPS} steps of batch {study.baseline.batch_size}")
    for mode in ("torchscript", "compile"):
        found = bitwise.probe(TrialSpec(study, (Option(mode),), args.device, train_for_accuracy=False), core=())
        check = bitwise.answer(mode, "eager", found)
        print(f"  {mode:<12} {check.why}")


if __name__ == "__main__":
    main()

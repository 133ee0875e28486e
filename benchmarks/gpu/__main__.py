"""`make gpu`: everything worth checking on a lent CUDA machine, in one command (about 20 minutes on an H100).

    python -m benchmarks.gpu [--out DIR] [--steps gpu-tests,catalogue,...]

In order, each step logged to DIR/<step>.log (DIR: --out, else $OUT when set, else results/gpu):

    gpu-tests     the GPU-marked tests (pytest -m gpu)
    catalogue     `ablate run` of benchmarks/gpu/catalogue.yaml on CUDA: every strategy and preset alone;
                  no trial may fail, and every skipped one must record its reason
    mnist_cnn     the mnist_cnn study on CUDA
    resnet        benchmarks/gpu/resnet_amp_channels_last.yaml: AMP's and channels_last's effect on ResNet-18
    bench         the GPU part of `make bench` (--no-grid), which rewrites the cuda section of
                  benchmarks/RESULTS.md (GPU, torch, commit)
    gpt_kjv       the gpt_kjv transformer study on CUDA as a guided search of 24 trials (float8 needs torchao:
                  pip install 'ablate[float8]', or carry its wheel)

`--steps` runs only the named ones, in that order: a lent machine takes at most 10 minutes a command.

Then DIR/summary.md (and the gpu-check section of benchmarks/RESULTS.md) lists each step's outcome with the GPU
name, driver, torch version and commit. Exit status: 0 when every step passed, 1 when one failed, and 2 at
once, with one line, where there is no CUDA device.
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

NO_GPU = 2
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _steps(out: Path) -> list[tuple[str, list[str]]]:
    py, results = sys.executable, str(out / "results")
    run = [py, "-m", "ablate", "run"]
    where = ["--device", "cuda", "--results", results]
    return [
        ("gpu-tests", [py, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests"]),
        ("catalogue", [*run, str(HERE / "catalogue.yaml"), *where]),
        ("mnist_cnn", [*run, "mnist_cnn", *where]),
        ("resnet", [*run, str(HERE / "resnet_amp_channels_last.yaml"), *where]),
        ("bench", [py, "-m", "benchmarks", "--device", "cuda", "--no-grid", "--results", str(out / "bench")]),
        ("gpt_kjv", [*run, "gpt_kjv", *where, "--search", "optuna", "--trials", "24"]),
    ]


STEPS = ("gpu-tests", "catalogue", "mnist_cnn", "resnet", "bench", "gpt_kjv")


def catalogue_problems(table: Path) -> list[str]:
    """What is wrong in the catalogue's results table: a failed trial, or a skipped one without its reason."""
    if not table.exists():
        return [f"no results table at {table}"]
    problems = []
    for row in csv.DictReader(table.open()):
        if row["state"] == "failed":
            problems.append(f"{row['combination']} failed: {row['reason']}")
        elif row["state"] == "skipped" and not row["reason"].strip():
            problems.append(f"{row['combination']} was skipped without a reason")
    return problems


def _machine() -> str:
    from ablate.machine import commit

    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    return (f"{torch.cuda.get_device_name(0)}, driver {driver}, CUDA {torch.version.cuda}, torch {torch.__version__}, "
            f"commit {commit()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "results/gpu"))
    parser.add_argument("--steps", help="comma-separated steps to run (default: all): " + ", ".join(STEPS))
    args = parser.parse_args(argv)
    chosen = args.steps.split(",") if args.steps else list(STEPS)
    if unknown := [s for s in chosen if s not in STEPS]:
        parser.error(f"unknown step {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    if not torch.cuda.is_available():
        print("make gpu: no CUDA device here (torch.cuda.is_available() is False); nothing was run", file=sys.stderr)
        return NO_GPU
    out: Path = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"Machine: {_machine()}", "", "| step | status | minutes | log |", "|---|---|---|---|"]
    failed = False
    steps = dict(_steps(out))
    for name, command in ((n, steps[n]) for n in chosen):
        began = time.monotonic()
        with (out / f"{name}.log").open("w") as log:
            print(f"make gpu: {name}: {' '.join(command)}", flush=True)
            status = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
        problems = catalogue_problems(out / "results" / "catalogue" / "grid-cuda.csv") if name == "catalogue" else []
        outcome = "passed" if status == 0 and not problems else f"FAILED (exit {status})"
        failed |= outcome != "passed"
        lines.append(f"| {name} | {outcome}{'; ' + '; '.join(problems) if problems else ''} | "
                     f"{(time.monotonic() - began) / 60:.1f} | {name}.log |")
        print(f"make gpu: {name}: {outcome}", flush=True)
    summary = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(summary)
    _record(summary)
    print(summary)
    return 1 if failed else 0


def _record(summary: str) -> None:
    from benchmarks.__main__ import RESULTS, _rewrite

    section = f"<!-- bench:gpu-check:start -->\n## `make gpu`\n\n{summary}<!-- bench:gpu-check:end -->"
    _rewrite(RESULTS, "gpu-check", section)


if __name__ == "__main__":
    sys.exit(main())

"""Short stand-ins for `make gpu`'s steps, run as the steps are (a subprocess each), for the CPU skeleton run.

    python tests/bench/gpu_standins.py MODE STEP ARGS...

ARGS are the real step's command after the interpreter (`-m ablate run STUDY --device cuda --results DIR ...`,
`-m benchmarks --device cuda ...`, `-m benchmarks.reproducibility ...`, `-m pytest ...`, `-m ablate report ...`), so
the stand-in writes where the real step would. MODE "quick": the step's outputs at once - a pytest-like last line; a
study's results table and summary.json; the bench's real `benchmarks.__main__.main` with canned measurements on a
pretend CUDA device, so its own writes (RESULTS.md in a folder nothing created) run for real. MODE "hang": ignores
SIGTERM and sleeps, the worst a step can do to a lease. MODE "fail": exits 3.
"""
from __future__ import annotations

import csv
import json
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]


def _after(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def _summary(results: Path, study: str) -> None:
    folder = results / study / "report" / "grid"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({
        "study": study, "protocol": {"description": "a stand-in"},
        "speedups": [{"combination": "amp(dtype=bf16)", "speedup": 2.5, "low": 2.25, "high": 2.75,
                      "throughput": 25000.0, "accuracy_change": None, "peak_memory_mb": 512.0,
                      "throughput_unit": "samples/s"}]}))


def _study(args: list[str]) -> None:
    """`-m ablate run STUDY ... --results DIR`: the table and summary a finished study leaves."""
    study, results = Path(args[3]).stem, Path(_after(args, "--results"))
    table = results / study / "grid-cuda.csv"
    table.parent.mkdir(parents=True, exist_ok=True)
    with table.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["trial", "combination", "state", "reason"])
        writer.writerows([[0, "baseline", "complete", ""], [1, "amp(dtype=bf16)", "complete", ""],
                          [2, "float8", "skipped", "float8: needs compute capability 8.9"]])
    _summary(results, study)


def _bench(args: list[str]) -> int:
    """The real bench entry point, its measurements canned and its device a pretend CUDA one."""
    sys.path.insert(0, str(ROOT))
    import torch

    import benchmarks.__main__ as bench
    from ablate.trial.machine import Machine
    from ablate.trial.metrics import STEP_PHASES
    from benchmarks import overhead, profiling, trials

    bench.resolve = lambda device: torch.device("cuda", 0)
    bench.describe = lambda device: Machine("cuda:0", "a stand-in GPU", torch.__version__, "abc123", "host")
    overhead.measure = lambda device, pairs, steps: [overhead.Overhead("baseline", [1.0, 1.004], 1.0, 1.0)]
    trial = {"startup_s": 1.0, "process_start_s": 0.5, "import_wait_s": 0.1, "data_load_s": 0.2,
             "throughput_cv_pct": 1.0, "throughput": 20000.0}
    study = SimpleNamespace(name="mnist_cnn", budget=SimpleNamespace(describe_windows=lambda: "3 windows"))
    trials.measure = lambda device, repeats, study_name: trials.TrialRuns(study, dict(trial), [dict(trial)] * 3)
    profiling.measure = lambda device, pairs, study_name: profiling.ProfilingCost(
        pairs, 1.002, (0.99, 1.014), [1.05] * pairs, {name: 1 / len(STEP_PHASES) for name in STEP_PHASES},
        [0.3] * pairs)
    return bench.main(args[2:])


def main(mode: str, step: str, args: list[str]) -> int:
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the worst case: the grace runs out, then SIGKILL
        time.sleep(3600)
    if mode == "fail":
        return 3
    if args[:3] == ["-m", "ablate", "report"]:
        _summary(Path(_after(args, "--results")), Path(args[3]).stem)
    elif args[:2] == ["-m", "pytest"]:
        print("3 passed, 1 skipped in 0.01s")
    elif args[:2] == ["-m", "benchmarks"]:
        return _bench(args)
    elif args[:2] == ["-m", "benchmarks.reproducibility"]:
        print(f"Reproducibility of `{Path(_after(args, '--study')).stem}` on a stand-in GPU:\n- agreeing: 4 of 4")
    else:
        _study(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))

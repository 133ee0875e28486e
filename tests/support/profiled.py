"""A stored study with known phases: two techniques, one that removes an input-bound baseline's wait for data and
one that targets a phase costing 1% of the step, measured in four blocks, every measurement profiled (or none)."""
from __future__ import annotations

from pathlib import Path

from ablate.config import study
from ablate.config.choices import BASELINE
from ablate.config.study import Study
from ablate.store.records import Record, combine
from ablate.trial import metrics as metric

MACHINE = {"device": "cpu", "device_name": "a CPU", "torch": "2.11", "commit": "c", "host": "h"}
WORKERS, PINNED = "num_workers(n=2)", "pin_memory"
BOTH = f"{WORKERS} + {PINNED}"
SAMPLES_PER_STEP = 64
# The baseline waits for data half its step; pinning targets the copy, 1% of it (a ceiling of x1.01: unlikely).
INPUT_BOUND = {"data": 0.52, "copy": 0.01, "forward": 0.17, "backward": 0.2, "optimizer": 0.08, "other": 0.02}
FED = {"data": 0.04, "copy": 0.02, "forward": 0.33, "backward": 0.39, "optimizer": 0.15, "other": 0.07}
ORDER = [BASELINE, WORKERS, PINNED, BOTH]  # each block's order
SPEEDUP = {BASELINE: 1.0, WORKERS: 1.9, PINNED: 1.0, BOTH: 1.9}
BLOCK = [1.0, 1.02, 0.98, 1.01]  # drift between blocks, which pairing cancels
JITTER = [1.002, 0.998, 1.003, 0.997]  # each process's own noise: the intervals' width
JOULES = {BASELINE: 2.0, WORKERS: 1.1, PINNED: 2.0, BOTH: 1.1}  # per sample, where energy is counted


def study_file(folder: Path) -> Study:
    path = folder / "profiled.yaml"
    path.write_text("model: byte_gpt\ndataset: kjv\ntask: next_token\n"
                    f"space: {{num_workers: [off, {{num_workers: {{n: 2}}}}], pin_memory: [off, {PINNED}]}}\n"
                    "budget: {throughput_only: true}\n")
    return study.load(str(path), "cpu")


def _levels(combination: str) -> dict[str, str]:
    return {"num_workers": WORKERS if WORKERS in combination else "off",
            "pin_memory": PINNED if PINNED in combination else "off"}


def measurement(number: int, combination: str, block: int, profiled: bool = True, energy: bool = False) -> Record:
    jitter = JITTER[(block + ORDER.index(combination)) % len(JITTER)]  # no two combinations alike: no exact ties
    rate = 640.0 * SPEEDUP[combination] * BLOCK[block] * jitter
    m = {metric.THROUGHPUT: rate, metric.window(0): rate * 0.999, metric.window(1): rate * 1.001,
         metric.TRAIN_SAMPLES: 10.0 * SAMPLES_PER_STEP, metric.TRAIN_STEPS: 10.0}
    if profiled:
        step = SAMPLES_PER_STEP / (640.0 * SPEEDUP[combination])
        shares = FED if WORKERS in combination else INPUT_BOUND
        m.update({metric.PROFILED_STEP_S: step, metric.PROFILED_STEPS: 20.0, metric.PROFILE_COST: 1.02})
        m.update({metric.phase_s(p): step * shares[p] for p in metric.STEP_PHASES})
        m.update({metric.phase_share(p): shares[p] for p in metric.STEP_PHASES})
    if energy:
        m.update({metric.ENERGY_J_PER_SAMPLE: JOULES[combination] * jitter,
                  metric.ENERGY_COUNTER: metric.ENERGY_COUNTERS["RAPL"]})
    return Record(number, combination, _levels(combination), "complete", block=block, machine=MACHINE, metrics=m,
                  phase="screen", position=number % 4, accuracy_note="throughput only (budget.throughput_only)")


def records(profiled: bool = True, energy: bool = False) -> list[Record]:
    """Every combination in each of four blocks, combined as the store does."""
    return combine([measurement(4 * b + i, c, b, profiled, energy) for b in range(4) for i, c in enumerate(ORDER)])

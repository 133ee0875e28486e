"""Kills at fixed points lose nothing: one study killed outright while its plan is queued, while its report is
written and in its MLflow wrap-up, each time followed by the same `ablate run`, ends as its design says.

Real processes: `ablate run` in a process group of its own, SIGKILLed from inside at the point
(benchmarks/chaos/kill_at.py), the stores then read through Optuna's and MLflow's own clients
(benchmarks/chaos/check.py); `python -m benchmarks.chaos` does the same with random kills and outages.

The reference is the design written down from the study file, not an uninterrupted run (a run more, about
20 s on 2 cores): a full randomized block design with a pinned seed and throughput only plans every slot at the
start and nothing after, so the slots (each combination once in each block, a block's places 0..n-1) and
summary.json's design (each combination over both blocks, the seeds, the protocol) are known without running it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.chaos import check
from benchmarks.chaos.harness import Ablate, Ran

SUPPORT = Path(__file__).resolve().parents[1] / "support"
STUDY = """\
description: two combinations of a small CNN, every one in each of 2 blocks, throughput only
model: tiny_mnist:TinyMnistCNN
dataset: mnist
space:
  set_to_none: [off, set_to_none]
budget:
  seed: 7
  throughput_only: true
  warmup_samples: 64
  window_samples: 64
  windows: 3
  train_subset: 1024
  profile_steps: 0
protocol:
  full_blocks: 2
  warm_up_trials: 0
  foreign_load_limit: null   # a busy machine measures again: another slot's trial, not what this tests
"""
COMBINATIONS, BLOCKS = ("baseline", "set_to_none"), 2
EXPECTED = check.Design(tuple((c, b, 0, "full", 0) for c in COMBINATIONS for b in range(BLOCKS)),
                        {c: BLOCKS for c in COMBINATIONS}, {"protocol": 7, "training": 7}, {"full_blocks": BLOCKS},
                        positions=False)
# Where each run is killed: after the first slot of the plan is queued; half-way through the report's third file
# (report.md, report.html, summary.json); in the MLflow wrap-up, before its second write.
KILLS = (("plan", 1), ("report", 3), ("end", 2))


@dataclass
class Killed:
    kills: list[Ran]
    resumes: list[Ran]
    checks: list[check.Check]

    def story(self) -> str:
        return "\n".join(line for ran in self.kills + self.resumes for line in ran.said(6))


@pytest.fixture(scope="module")
def killed(tmp_path_factory, mnist) -> Killed:
    folder = tmp_path_factory.mktemp("chaos")
    (folder / "chaos.yaml").write_text(STUDY)
    results = folder / "results"
    ablate = Ablate(["run", str(folder / "chaos.yaml"), "--device", "cpu", "--results", str(results)],
                    folder / "logs", python_path=(SUPPORT,))
    kills = [ablate.run(point, n, timeout=300) for point, n in KILLS]
    resumes = ablate.until_done(tries=3, timeout=300)
    return Killed(kills, resumes, check.check(check.read(results, "chaos"), EXPECTED))


@pytest.mark.parametrize("index", range(len(KILLS)), ids=[p for p, _ in KILLS])
def test_each_run_is_killed_at_its_point(killed, index):
    ran, (point, _) = killed.kills[index], KILLS[index]
    assert ran.killed and ran.fired and ran.fired.startswith(point), killed.story()


def test_the_same_command_then_exits_0_without_a_traceback(killed):
    last = killed.resumes[-1]
    assert last.code == 0, killed.story()
    assert "Traceback" not in "".join(r.output for r in killed.resumes), killed.story()


CHECKS = ("every planned slot measured exactly once", "each block's places once each",
          "nothing RUNNING or WAITING in Optuna", "nothing RUNNING in MLflow", "one MLflow run per measurement",
          "one parent run, FINISHED, the one summary.json names", "the end written to MLflow",
          "summary.json valid, its design the reference's")


@pytest.mark.parametrize("name", CHECKS)
def test_the_stored_study_holds(killed, name):
    found = {c.name: c for c in killed.checks}
    assert set(found) == set(CHECKS)
    assert found[name].passed, "\n".join([c.line() for c in killed.checks] + [killed.story()])

"""`make gpu` (benchmarks/gpu): what it refuses without a GPU, how it fits a lent machine, and what comes back."""
from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from benchmarks.gpu import __main__ as gpu
from benchmarks.gpu.bundle import catalogue_problems
from benchmarks.gpu.steps import (
    COMMAND_END_S,
    COMMAND_S,
    END_RESERVE_S,
    PARTS,
    PLANNED_STEPS_S,
    SETUP_PLANNED_S,
    STEPS,
    Step,
    limits,
)

ROOT = Path(__file__).resolve().parents[2]
DEVICE_WHEELS = ROOT.parent / "shared" / "tools" / "device-wheels.sh"
DEVICE_CALL_CHARS = 2000  # the device tool's limit on a command


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_a_gpu_it_exits_at_once_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == gpu.NO_GPU
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and "no CUDA device" in done.stderr
    assert not any(tmp_path.iterdir())


def test_a_failed_trial_or_a_skip_without_reason_is_a_problem(tmp_path):
    table = tmp_path / "grid-cuda.csv"
    table.write_text("trial,combination,state,reason\n0,baseline,complete,\n1,tf32,skipped,TF32: needs 8.0\n"
                     "2,compile,failed,compile: boom\n3,amp,skipped,\n")
    assert catalogue_problems(table) == ["compile failed: compile: boom", "amp was skipped without a reason"]
    assert catalogue_problems(tmp_path / "missing.csv") == ["no results table at missing.csv"]


def test_the_two_commands_fit_a_lease_and_the_dry_run_says_so():
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert SETUP_PLANNED_S + PLANNED_STEPS_S + END_RESERVE_S == COMMAND_END_S < COMMAND_S
    for part, names in PARTS.items():
        assert gpu.device_command(part) in done.stdout and len(gpu.device_command(part)) <= DEVICE_CALL_CHARS
        assert gpu.device_command(part).endswith(f"--budget-s $(({COMMAND_END_S} - SECONDS))")
        assert sum(STEPS[n].limit_s for n in names) == PLANNED_STEPS_S  # at the planned set-up, nothing is scaled
        budget = COMMAND_END_S - SETUP_PLANNED_S
        assert f"part {part}, at a set-up of {SETUP_PLANNED_S} s: --budget-s {budget} = {PLANNED_STEPS_S} s of " \
               f"steps + {END_RESERVE_S} s" in done.stdout
        for n in names:  # each step: its share, its limit, and its SIGTERM, its stop and report kept after it
            reserve = gpu.STOP_GRACE_S + (gpu.REPORT_RESERVE_S if STEPS[n].study else 0)
            assert re.search(rf"^    {n} +{STEPS[n].limit_s} s +{STEPS[n].limit_s} s +{STEPS[n].limit_s - reserve} s ",
                             done.stdout, re.M), n
    assert done.stdout.count(f"at the worst, the part ends {SETUP_PLANNED_S} + {COMMAND_END_S - SETUP_PLANNED_S} = "
                             f"{COMMAND_END_S} s into its command (limit {COMMAND_S} s)") == len(PARTS)
    every = sum(STEPS[n].limit_s for p in PARTS.values() for n in p)
    assert f"both parts: {every / 60:.1f} min of steps" in done.stdout


def test_every_strategy_is_in_a_default_step():
    # The catalogue (MNIST CNN) and the transformer catalogue together name every registered strategy.
    from ablate.config.study import load
    from strategies import REGISTRY

    named = {o.name for f in ("catalogue", "transformers")
             for d in dict(load(str(STEPS[f].study), "cuda").space).values() for o in d}
    assert set(REGISTRY) <= named, set(REGISTRY) - named


def test_the_readme_gives_the_lent_machine_exactly_these_commands():
    readme = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for part in PARTS:
        assert gpu.device_command(part) in readme


@pytest.mark.skipif(not DEVICE_WHEELS.exists(), reason="../shared/tools/device-wheels.sh is not beside the checkout")
def test_the_prefix_is_in_step_with_device_wheels():
    header = " ".join(line.lstrip("# ").rstrip(" \\") for line in DEVICE_WHEELS.read_text().splitlines()
                      if line.startswith("#"))
    # The import check is the project's own (what the steps import: tests/bench/test_gpu_lease.py), wider than the
    # header's; the install, the data and the paths are the script's.
    for piece in ("--no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl",
                  "tar xzf .whl/datasets.tgz -C /tmp", "PYTHONPATH=$PWD:/tmp/site", "ABLATE_DATA_DIR=/tmp/datasets"):
        assert piece in header and piece in gpu.PREFIX


def test_the_prefix_runs_here_as_far_as_a_cpu_can_take_it(tmp_path):
    # Its CPU parts, for typos: unpack a datasets.tgz and export what the steps read; no pip install here.
    (tmp_path / ".whl").mkdir()
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "marker").write_text("x")
    subprocess.run(["tar", "czf", str(tmp_path / ".whl" / "datasets.tgz"), "-C", str(tmp_path), "datasets"], check=True)
    (tmp_path / ".whl" / "commit").write_text("abc123\n")
    start = gpu.PREFIX.index("tar xzf")
    tail = gpu.PREFIX[start:].replace("-C /tmp", f"-C {tmp_path / 'out'}").replace(
        gpu.IMPORT_CHECK, f"{sys.executable} -c 'import mlflow, optuna' || exit 1; ")
    script = f"mkdir -p {tmp_path / 'out'} && {tail}echo $ABLATE_DATA_DIR $ABLATE_COMMIT $ABLATE_OFFLINE $PYTHONPATH"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["/tmp/datasets", "abc123", "1", f"{tmp_path}:/tmp/site"]
    assert (tmp_path / "out" / "datasets" / "marker").exists()


def test_the_budget_is_shared_in_proportion_to_the_shares():
    names = list(PARTS[1])
    assert limits(names, PLANNED_STEPS_S) == {n: STEPS[n].limit_s for n in names}
    for steps_s in (200, 600):  # a warm machine's larger budget is shared too
        shared = limits(names, steps_s)
        assert sum(shared.values()) == pytest.approx(steps_s)
        assert shared["catalogue"] / shared["gpu-tests"] == pytest.approx(STEPS["catalogue"].limit_s /
                                                                          STEPS["gpu-tests"].limit_s)


def test_an_unknown_step_is_refused():
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--steps", "gpt-kjv"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unknown step gpt-kjv; choose from gpu-tests" in done.stderr


@dataclass(frozen=True)
class _Scripted(Step):
    script: str = ""

    def command(self, scratch: Path) -> list[str]:
        return [sys.executable, "-c", self.script.format(scratch=scratch)]


def test_each_step_is_held_to_its_limit_and_everything_comes_back_after_every_step(tmp_path, monkeypatch):
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    monkeypatch.setattr(gpu, "MIN_STEP_S", 0.5)
    monkeypatch.setattr(gpu, "STOP_GRACE_S", 0.5)
    monkeypatch.setattr(gpu, "END_RESERVE_S", 0.5)
    monkeypatch.setattr(gpu, "_machine", lambda: "a fake GPU")
    monkeypatch.setattr(gpu, "_environment", lambda scratch, deadline: [])
    steps = {
        "slow": _Scripted("slow", 4, "sleeps", script="import time; time.sleep(60)"),
        "first": _Scripted("first", 30, "exits 0", script="print('first ran')"),
        # Passes only if the first step's outcome already reached $OUT: a command stopped from outside keeps it.
        "second": _Scripted("second", 30, "reads", script=f"import sys; sys.exit('| first | passed' not in "
                                                          f"open({str(out / 'summary.md')!r}).read())"),
        "bad": _Scripted("bad", 30, "fails", script="raise SystemExit(3)"),
    }
    assert gpu._run(list(steps), 94.5, "test", scratch, out, steps) == 1
    summary = (out / "summary.md").read_text()
    assert "| first | passed |" in summary and "| second | passed |" in summary
    assert re.search(r"\| slow \| stopped at its limit \(\d+ s\), partial results kept \|", summary)
    assert "| bad | FAILED (exit 3) |" in summary
    assert sorted(p.name for p in out.iterdir()) == ["gpu-test.tgz", "summary.md"]
    with tarfile.open(out / "gpu-test.tgz") as tar:
        names = tar.getnames()
        assert {"scratch/summary.md", "scratch/section.md", "scratch/first.log"} <= set(names)
        assert tar.extractfile("scratch/first.log").read() == b"first ran\n"

    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark records\n\nkept\n")
    from benchmarks.gpu.bundle import merge

    for _ in range(2):  # merging again replaces the section
        assert merge(out / "gpu-test.tgz", results, tmp_path / "unpacked") == ["gpu-test"]
    text = results.read_text()
    assert text.count("<!-- bench:gpu-test:start") == 1 and "kept" in text and "| bad | FAILED (exit 3) |" in text


def test_merge_refuses_what_is_not_a_make_gpu_tarball_in_one_line(tmp_path):
    bogus = tmp_path / "x.tgz"
    bogus.write_text("not a tarball")
    for path in (bogus, tmp_path / "missing.tgz"):
        done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "merge", str(path)], cwd=ROOT,
                              capture_output=True, text=True)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("merge:")


def test_without_git_the_commit_comes_from_the_environment(tmp_path, monkeypatch):
    from ablate.trial.machine import COMMIT_ENV, commit

    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert commit(tmp_path) == "unknown"
    monkeypatch.setenv(COMMIT_ENV, "c9024d3")
    assert commit(tmp_path) == "c9024d3"
    assert commit() != "c9024d3"  # a checkout with .git says its own


def test_docs_gpu_md_gives_each_steps_share_and_sigterm_as_the_dry_run_does():
    text = (ROOT / "docs" / "gpu.md").read_text()
    rows = re.findall(r"^\| (\d) \| ([\w-]+) \| (\d+) s \| (\d+) s \|", text, re.M)
    assert {name: (int(part), int(share), int(sigterm)) for part, name, share, sigterm in rows} == {
        name: (part, STEPS[name].limit_s,
               STEPS[name].limit_s - gpu.STOP_GRACE_S - (gpu.REPORT_RESERVE_S if STEPS[name].study else 0))
        for part, names in PARTS.items() for name in names}
    assert f"--budget-s $(({COMMAND_END_S} - SECONDS))" in text
    assert f"{SETUP_PLANNED_S} + {PLANNED_STEPS_S} + {END_RESERVE_S} = {COMMAND_END_S} s" in text

"""`make gpu` (benchmarks/gpu): what it refuses without a GPU, how it fits a lent machine, and what comes back."""
from __future__ import annotations

import os
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
from benchmarks.gpu.lease import RERUN_END_S, lease_rows
from benchmarks.gpu.steps import (
    COMMAND_END_S,
    COMMAND_S,
    END_RESERVE_S,
    LEASE_S,
    NO_START_UNDER_S,
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


def test_a_15_minute_lease_fits_one_command_with_a_fresh_install_and_the_dry_run_says_so():
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {what: seconds for what, seconds, _ in lease_rows()}
    assert sum(rows.values()) == LEASE_S == 900  # start, the one command, transfer and what is left: device time
    assert SETUP_PLANNED_S + PLANNED_STEPS_S + END_RESERVE_S == COMMAND_END_S < COMMAND_S  # a fresh install included
    assert rows["left"] < NO_START_UNDER_S  # no second start: what is left is for a rerun on the warm machine
    assert rows["left"] >= RERUN_END_S + 30  # the rerun's command and its transfer back
    for what, seconds in rows.items():
        assert re.search(rf"^    {re.escape(what)} +{seconds} s ", done.stdout, re.M), what
    estimates = [float(e) for e in re.findall(r"^    [\w-]+ +.+? +(\d+) s +\d+ s +\d+ s$", done.stdout, re.M)]
    assert estimates and sum(estimates) <= PLANNED_STEPS_S
    assert f"the command ends {SETUP_PLANNED_S} + {PLANNED_STEPS_S} + {END_RESERVE_S} = {COMMAND_END_S} s" in \
        done.stdout
    for command in (gpu.device_command(), gpu.device_command("STEP", RERUN_END_S)):
        assert command in done.stdout and len(command) <= DEVICE_CALL_CHARS
    assert gpu.device_command().endswith(f"next --budget-s $(({COMMAND_END_S} - SECONDS))")
    longest = ",".join(STEPS)  # the longest --steps a rerun could name
    assert len(gpu.device_command(longest)) <= DEVICE_CALL_CHARS


def test_every_strategy_is_in_a_ledger_step():
    from ablate.config.study import load
    from strategies import REGISTRY

    named = {o.name for s in STEPS.values() if s.study
             for d in dict(load(str(ROOT / s.study), "cuda").space).values() for o in d}
    assert set(REGISTRY) <= named, set(REGISTRY) - named


def _rows(name: str) -> list[str]:
    from ablate.config.study import load

    return [o.label for dim, opts in load(str(ROOT / "benchmarks" / "gpu" / name), "cuda").space
            for o in opts if o.name is not None and dim == "technique"]


def test_the_split_steps_hold_the_whole_catalogues_rows_each_once():
    # catalogue.yaml and transformers.yaml stay whole (for your own GPU); the lease runs them in steps of ~3 min.
    split = _rows("phases.yaml") + [r for f in ("eager", "precision", "graphs") for r in _rows(f"catalogue_{f}.yaml")]
    assert sorted(split) == sorted(_rows("catalogue.yaml"))
    split = [r for f in ("eager", "compiled", "float8_compiled") for r in _rows(f"transformers_{f}.yaml")]
    assert sorted(split) == sorted(_rows("transformers.yaml"))


def test_the_docs_give_the_lent_machine_exactly_this_command():
    readme = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    assert gpu.device_command() in readme


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


def test_the_budget_is_shared_in_proportion_to_the_estimates():
    names = ["gpu-tests", "mnist-resident"]
    assert limits(names, 270, STEPS, {"gpu-tests": 90, "mnist-resident": 180}) == {"gpu-tests": 90,
                                                                                   "mnist-resident": 180}
    for steps_s in (200, 600):  # a warm machine's larger budget is shared too
        shared = limits(names, steps_s, STEPS, {"gpu-tests": 60, "mnist-resident": 180})
        assert sum(shared.values()) == pytest.approx(steps_s)
        assert shared["mnist-resident"] / shared["gpu-tests"] == pytest.approx(3)


def test_an_unknown_step_is_refused():
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "next", "--steps", "gpt-kjv"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unknown step 'gpt-kjv'; choose from gpu-tests" in done.stderr


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
        "slow": _Scripted("slow", 4, "sleeps", "pytest", script="import time; time.sleep(60)"),
        "first": _Scripted("first", 30, "exits 0", "pytest", script="print('first ran')"),
        # Passes only if the first step's outcome already reached $OUT: a command stopped from outside keeps it.
        "second": _Scripted("second", 30, "reads", "pytest", script=f"import sys; sys.exit('| first | passed' not in "
                                                          f"open({str(out / 'summary.md')!r}).read())"),
        "bad": _Scripted("bad", 30, "fails", "pytest", script="raise SystemExit(3)"),
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
        assert merge(out / "gpu-test.tgz", results, tmp_path / "unpacked") == (["gpu-test"], [])
    text = results.read_text()
    assert text.count("<!-- bench:gpu-test:start") == 1 and "kept" in text and "| bad | FAILED (exit 3) |" in text


def test_merge_refuses_what_is_not_a_make_gpu_tarball_in_one_line_and_writes_nothing(tmp_path):
    bogus, two = tmp_path / "x.tgz", tmp_path / "two.tgz"
    bogus.write_text("not a tarball")
    with tarfile.open(two, "w:gz") as tar:  # a tarball, but not one `make gpu` wrote: two top folders
        for top in ("a", "b"):
            tar.add(bogus, arcname=f"{top}/x")
    for path in (bogus, two, tmp_path / "missing.tgz"):
        done = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "merge", str(path)], cwd=tmp_path,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("merge:")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["two.tgz", "x.tgz"]  # no results/gpu/ made


def test_without_git_the_commit_comes_from_the_environment(tmp_path, monkeypatch):
    from ablate.trial.machine import COMMIT_ENV, commit

    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert commit(tmp_path) == "unknown"
    monkeypatch.setenv(COMMIT_ENV, "c9024d3")
    assert commit(tmp_path) == "c9024d3"
    assert commit() != "c9024d3"  # a checkout with .git says its own


def test_docs_gpu_md_says_the_lease_and_the_ledger_as_the_code_does():
    text = (ROOT / "docs" / "gpu.md").read_text()
    for what, seconds, _ in lease_rows():
        assert re.search(rf"\| {re.escape(what)} \| {seconds} s \|", text), what
    assert f"--budget-s $(({COMMAND_END_S} - SECONDS))" in text
    assert f"{SETUP_PLANNED_S} + {PLANNED_STEPS_S} + {END_RESERVE_S} = {COMMAND_END_S} s" in text
    named = re.findall(r"^\| \d+ \| `([\w-]+)` \| (\d+) s \|", text, re.M)
    assert [n for n, _ in named] == list(STEPS)  # the order of value, as the ledger holds it
    assert {n: float(s) for n, s in named} == {n: step.limit_s for n, step in STEPS.items()}  # as planned there

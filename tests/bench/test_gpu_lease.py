"""`make gpu` on a lent machine, checked on a CPU with a fake device: the ledger's plan runs in one command that fits
its budget, what comes back is what is needed, and merge folds it into RESULTS.md, the ledger and the exports - a
stopped step leaving the finished ones merged and itself not done (issue 48; review gpu-readiness.md: C1, C3, L1-L6).

The skeleton runs `next` end to end with every step replaced by a short stand-in (tests/bench/gpu_standins.py) that
writes where the real step writes; the bench's stand-in is the real `make bench` entry point with canned
measurements, so its own writes run for real.
"""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.gpu import __main__ as gpu
from benchmarks.gpu import ledger
from benchmarks.gpu import steps as plan
from benchmarks.gpu.bundle import merge, pack
from benchmarks.gpu.steps import COMMAND_END_S, PLANNED_STEPS_S, STEPS, Step
from benchmarks.sections import rewrite

STANDINS = Path(__file__).resolve().parent / "gpu_standins.py"
SIMULATED_SETUP_S = 60  # the install, unpack and import check, as bash's SECONDS has counted them


@dataclass(frozen=True)
class StandIn(Step):
    """The real step, its command run by gpu_standins.py in `mode`, with the real command's arguments."""

    mode: str = "quick"

    def command(self, scratch: Path) -> list[str]:
        return [sys.executable, str(STANDINS), self.mode, self.name, *super().command(scratch)[1:]]

    def report_command(self, scratch: Path) -> list[str]:
        return [sys.executable, str(STANDINS), self.mode, self.name, *super().report_command(scratch)[1:]]


def standins(mode: str, modes: dict[str, str] | None = None) -> dict[str, Step]:
    return {name: StandIn(**dataclasses.asdict(step), mode=(modes or {}).get(name, mode))
            for name, step in STEPS.items()}


def budget_after_setup(setup_s: int) -> int:
    """The device command's own --budget-s, evaluated by bash as it would be `setup_s` seconds into the command."""
    expression = re.search(r"--budget-s (\$\(\(.*\)\))$", gpu.device_command())
    assert expression, "the device command passes no --budget-s"
    done = subprocess.run(["bash", "-c", f"SECONDS={setup_s}; echo \"{expression.group(1)}\""], capture_output=True,
                          text=True, check=True)
    return int(done.stdout)


KIND, TORCH = "NVIDIA H100", "2.11.0+cu130"


@pytest.fixture
def lent(monkeypatch, tmp_path):
    """`python -m benchmarks.gpu` as on a lent H100, its steps the stand-ins (quick unless a test says), its ledger,
    RESULTS.md and exports copies under tmp_path."""
    import torch

    monkeypatch.setattr(gpu, "STEPS", standins("quick"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the steps, stand-ins, run in processes of their own
    monkeypatch.setattr(gpu, "_device", lambda: (KIND, TORCH))
    monkeypatch.setattr(gpu, "_machine", lambda: "a stand-in GPU")
    monkeypatch.setattr(gpu, "_environment", lambda scratch, deadline: [])  # pip check and list: tested below
    copy = tmp_path / "ledger.yaml"
    copy.write_text(ledger.LEDGER.read_text())
    monkeypatch.setattr(ledger, "LEDGER", copy)
    monkeypatch.setattr(ledger, "RUNS", tmp_path / "runs")
    (tmp_path / "RESULTS.md").write_text("# Benchmark records\n\nkept\n")
    return monkeypatch


def _next(tmp_path: Path, *args: str) -> tuple[int, float, Path]:
    """`next` as the device command runs it; its exit status, wall time and tarball."""
    began = time.monotonic()
    code = gpu.main(["next", *args, "--scratch", str(tmp_path / "scratch"), "--out", str(tmp_path / "out")])
    tarballs = sorted((tmp_path / "out").glob("gpu-*.tgz"))
    assert len(tarballs) == 1, tarballs
    return code, time.monotonic() - began, tarballs[0]


def _merge(tmp_path: Path, tarball: Path) -> tuple[list[str], list[str]]:
    return merge(tarball, tmp_path / "RESULTS.md", tmp_path / "unpacked")


def _plan(kind: str = KIND, torch: str = TORCH) -> list[str]:
    steps = ledger.load()
    return [p.step.name for p in ledger.plan(steps, kind, ledger.paths_hashes(steps, plan.ROOT), torch,
                                             PLANNED_STEPS_S)]


# -- the skeleton: next, merge, next again ------------------------------------------------------------------------

def test_next_runs_the_plan_and_merge_records_it_so_the_next_lease_goes_on(lent, tmp_path):
    planned = _plan()
    budget = budget_after_setup(SIMULATED_SETUP_S)
    code, took, tarball = _next(tmp_path, "--budget-s", str(budget))
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert code == 0, summary
    assert [n for n in STEPS if f"| {n} | passed |" in summary] == planned, summary
    assert SIMULATED_SETUP_S + took < COMMAND_END_S
    sections, done = _merge(tmp_path, tarball)
    assert done == planned and sections[0].startswith("gpu-nvidia-h100-")
    assert ("cuda" in sections) is ("gpu-noise" in planned)
    text = (tmp_path / "RESULTS.md").read_text()
    assert "kept" in text and "## `make gpu` on NVIDIA H100 at " in text
    assert "| amp(dtype=bf16) | x2.50 [2.25, 2.75] |" in text  # a study's speed-ups reach the section
    steps = {s.name: s for s in ledger.load()}
    for name in planned:
        run = steps[name].runs[KIND]
        assert (run.outcome, run.torch, run.paths_hash) == ("passed", TORCH, ledger.paths_hashes(
            [steps[name]], plan.ROOT)[name])
        assert run.figures and run.figures.endswith("#" + ledger.anchor(re.search(
            r"^## (.*)$", text.split(f"bench:{sections[0]}:start")[1], re.M).group(1)))
        exported = json.loads((tmp_path / "runs" / "nvidia-h100" / f"{name}.json").read_text())
        assert exported["record"]["step"] == name and run.export and run.export.endswith(f"nvidia-h100/{name}.json")
    study = next(n for n in planned if STEPS[n].command_kind == "study")
    assert json.loads((tmp_path / "runs" / "nvidia-h100" / f"{study}.json").read_text())["speedups"]
    assert steps["gpu-tests"].runs["NVIDIA H200"].commit == "b6f7068d6120"  # another kind's record stays
    # The next lease on the same kind goes on where this one stopped; another kind starts from the top.
    again = _plan()
    assert not set(planned) & set(again) and again
    alone = {s.name for s in ledger.load() if s.alone}  # each waits for a command of its own
    assert _plan("NVIDIA A100")[:len(planned)] == [n for n in STEPS if n not in alone][:len(planned)]


@pytest.mark.slow
def test_a_step_stopped_at_its_limit_leaves_the_finished_steps_merged_and_itself_not_done(lent, tmp_path):
    lent.setattr(gpu, "STEPS", standins("quick", {"catalogue-eager": "hang"}))
    for name in ("STOP_GRACE_S", "REPORT_RESERVE_S", "END_RESERVE_S", "MIN_STEP_S"):
        lent.setattr(gpu, name, getattr(plan, name) / SCALE)
    names = ["gpu-tests", "catalogue-eager", "resnet18"]
    budget = sum(STEPS[n].limit_s for n in names) / SCALE
    code, took, tarball = _next(tmp_path, "--steps", ",".join(names), "--budget-s", f"{budget:g}")
    assert code == 1 and took <= budget
    sections, done = _merge(tmp_path, tarball)
    assert done == ["gpu-tests", "resnet18"]
    steps = {s.name: s for s in ledger.load()}
    assert [steps[n].runs[KIND].outcome for n in names] == ["passed", "stopped", "passed"]
    assert "catalogue-eager" in _plan() and not {"gpu-tests", "resnet18"} & set(_plan())
    assert ledger.status(steps["catalogue-eager"], KIND, ledger.paths_hashes(list(steps.values()), plan.ROOT),
                         TORCH) == (0, "stopped at its limit last time")


@pytest.mark.slow
def test_a_command_whose_every_step_must_be_stopped_and_killed_still_ends_within_its_budget(lent, tmp_path):
    # The worst a command can meet: every step ignores SIGTERM until killed, and every stopped study's report hangs.
    lent.setattr(gpu, "STEPS", standins("hang"))
    for name in ("STOP_GRACE_S", "REPORT_RESERVE_S", "END_RESERVE_S", "MIN_STEP_S"):
        lent.setattr(gpu, name, getattr(plan, name) / SCALE)
    budget = (COMMAND_END_S - SIMULATED_SETUP_S) / SCALE
    code, took, tarball = _next(tmp_path, "--budget-s", f"{budget:g}")
    assert took <= budget, f"the command took {took:.2f} s of a {budget:.2f}-s budget"
    assert code == 1
    summary = (tmp_path / "out" / "summary.md").read_text()
    outcomes = re.findall(r"^\| ([\w-]+) \| ([^|]*)\|", summary, re.M)[1:]  # after the header
    assert outcomes and all(o.startswith(("stopped at its limit", "not run")) for _, o in outcomes), summary
    assert _merge(tmp_path, tarball)[1] == []  # nothing is marked done


SCALE = 40  # every figure of the lease divided by this: a 540-s command in 13.5 s


# -- C1: part 2 cannot crash on its own paths --------------------------------------------------------------------

def test_c1_a_section_is_written_into_a_folder_nothing_created(tmp_path):
    path = tmp_path / "bench" / "RESULTS.md"
    rewrite(path, "cuda", "<!-- bench:cuda:start -->\nx\n<!-- bench:cuda:end -->")
    assert "<!-- bench:cuda:start -->\nx\n" in path.read_text()


def test_c1_the_bench_writes_its_output_into_a_new_folder(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import benchmarks.__main__ as bench
    from benchmarks import overhead, trials

    trial = {"startup_s": 1.0, "process_start_s": 0.5, "import_wait_s": 0.1, "data_load_s": 0.2,
             "throughput_cv_pct": 1.0, "throughput": 20000.0}
    study = SimpleNamespace(name="mnist_cnn", budget=SimpleNamespace(describe_windows=lambda: "3 windows"))
    monkeypatch.setattr(overhead, "measure", lambda device, pairs, steps: [overhead.Overhead("b", [1.0], 1.0, 1.0)])
    monkeypatch.setattr(trials, "measure", lambda device, repeats, study_name: trials.TrialRuns(study, trial, [trial]))
    output = tmp_path / "new" / "RESULTS.md"
    assert bench.main(["--device", "cpu", "--no-grid", "--profile-pairs", "0", "--output", str(output)]) == 0
    assert "### 3. Measurement noise" in output.read_text()


def test_c1_summaries_and_tarballs_go_where_nothing_was_created(tmp_path):
    scratch, out = tmp_path / "a" / "scratch", tmp_path / "b" / "out"
    gpu._write("x", "a GPU", ["| s | passed | 1 | 0 |"], [], scratch, out)
    pack(scratch, tmp_path / "c" / "d.tgz")
    assert (out / "summary.md").exists() and (out / "gpu-x.tgz").exists() and (tmp_path / "c" / "d.tgz").exists()


# -- C3: pack from a git worktree ---------------------------------------------------------------------------------

def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_c3_pack_works_from_a_git_worktree(tmp_path, monkeypatch):
    repo, worktree = tmp_path / "repo", tmp_path / "worktree"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "a.txt").write_text("a\n")
    _git("add", "a.txt", cwd=repo)
    _git("commit", "-qm", "a", cwd=repo)
    _git("worktree", "add", "-q", str(worktree), cwd=repo)
    assert (worktree / ".git").is_file()  # what `pack` met: .git is a file in a worktree
    tools = tmp_path / "shared" / "tools"  # beside the checkout, as ../shared/tools is
    tools.mkdir(parents=True)
    # A stand-in for device-wheels.sh: notes .whl/ where git keeps this checkout's excludes, packs one file.
    (tools / "device-wheels.sh").write_text(
        'set -euo pipefail\ncd "$(git rev-parse --show-toplevel)"\n'
        'echo /.whl/ >> "$(git rev-parse --git-path info/exclude)"\nmkdir -p .whl\necho x > .whl/a.whl\n')
    monkeypatch.setattr(gpu, "ROOT", worktree)
    assert gpu._pack() == 0
    assert (worktree / ".whl" / "commit").read_text().strip() == _git("rev-parse", "--short=12", "HEAD",
                                                                     cwd=worktree)


# -- L1: the command ends within its budget, counted from its start ----------------------------------------------

def test_l1_the_budget_counts_from_the_commands_start():
    assert budget_after_setup(0) == COMMAND_END_S
    assert budget_after_setup(SIMULATED_SETUP_S) == COMMAND_END_S - SIMULATED_SETUP_S


# -- L2: no bitwise probe where none can pay ----------------------------------------------------------------------

SYNTHETIC = """description: bitwise candidates on data without accuracy
model: tiny_mnist:TinyMnistCNN
dataset: {dataset}
space:
  graph: [off, torchscript]
budget: {{train_samples: 64, warmup_samples: 32, window_samples: 32, windows: 2, train_subset: 256,
         test_subset: 64}}
"""


def _probed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataset: str, single_pass: bool = False) -> list[str]:
    """The accuracy groups a runner of a one-graph-mode study would probe before its first measurement."""
    from ablate.config import study as studies
    from ablate.config.design import SINGLE_PASS
    from ablate.run import bitwise
    from ablate.run.runner import Runner
    from ablate.store.storage import default_storage
    from ablate.trial.machine import describe

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{dataset.split(chr(10))[0]}.yaml"
    path.write_text(SYNTHETIC.format(dataset=dataset))
    study = studies.load(str(path), "cpu")
    probed: list[str] = []
    monkeypatch.setattr(bitwise, "check", lambda todo, *args: probed.extend(todo) or [])
    runner = Runner(study, describe("cpu"), "grid", default_storage(study, tmp_path), tmp_path,
                    protocol=SINGLE_PASS if single_pass else None)
    runner._check_bitwise()
    return probed


def test_l2_a_runner_on_synthetic_data_launches_no_probe(tmp_path, monkeypatch):
    synthetic = "synthetic\ndataset_options: {image_size: 28, channels: 1, num_classes: 10, samples: 256}"
    assert _probed(tmp_path, monkeypatch, synthetic) == []


def test_l2_a_runner_on_cifar_stood_in_for_by_fake_data_launches_no_probe(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "no-data"))  # make gpu's resnet step: no CIFAR files
    monkeypatch.setenv("ABLATE_OFFLINE", "1")
    assert _probed(tmp_path, monkeypatch, "cifar10") == []


def test_l2_a_single_pass_at_one_seed_launches_no_probe_and_real_data_still_does(tmp_path, monkeypatch, mnist):
    assert _probed(tmp_path, monkeypatch, "mnist", single_pass=True) == []
    assert _probed(tmp_path / "raced", monkeypatch, "mnist") == ["torchscript"]  # the control: the probe runs


# -- L4: what the tarball leaves out ------------------------------------------------------------------------------

def test_l4_compile_caches_killed_trials_folders_and_decoded_data_stay_out_of_the_tarball(tmp_path):
    scratch = tmp_path / "part2"
    study = scratch / "results" / "transformers" / "transformers"
    kept = [scratch / "summary.md", study / "grid-cuda.csv", study / "report" / "grid" / "summary.json",
            scratch / "results" / "notes" / "cold-start.md"]  # a file named cold-* is not a cold cache
    left_out = [study / "compile-cache" / "0123abcd" / "triton" / "k.cubin",
                study / "compile-cache" / "cold-123-x" / "fxgraph" / "g.py",
                scratch / "results" / "cold-456-y" / "k.ptx",
                scratch / ".ablate-cache" / "mnist-train.pt.npy",
                study / "optuna.db"]
    for path in kept + left_out:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    pack(scratch, tmp_path / "out.tgz")
    with tarfile.open(tmp_path / "out.tgz") as tar:
        names = set(tar.getnames())
    assert {f"part2/{p.relative_to(scratch)}" for p in kept} <= names
    assert not [n for n in names if re.search(r"compile-cache|/cold-\d|\.ablate-cache|\.db$", n)], names


@pytest.mark.skipif(not (plan.ROOT.parent / "shared" / "tools" / "device-wheels.sh").exists(),
                    reason="../shared/tools/device-wheels.sh is not beside the checkout")
def test_l4_the_datasets_tarball_leaves_out_the_decoded_cache():
    script = (plan.ROOT.parent / "shared" / "tools" / "device-wheels.sh").read_text()
    assert re.search(r"tar czf \.whl/datasets\.tgz .*--exclude='\.ablate-cache'", script)


# -- L5: a warm machine does not install the wheels again ----------------------------------------------------------

@pytest.mark.parametrize("warm", [False, True])
def test_l5_a_warm_machine_does_not_reinstall_the_wheels(tmp_path, warm):
    install = gpu.PREFIX[:gpu.PREFIX.index(" && tar xzf")]
    site = tmp_path / "site"
    if warm:
        (site / "mlflow").mkdir(parents=True)
    script = install.replace("/tmp/site", str(site)).replace("python3 -m pip install", "echo installing")
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ("installing" in done.stdout) is not warm


# -- L6: the import check imports what the steps import; pip check and pip list come back -----------------------

@pytest.mark.slow
def test_l6_the_import_check_imports_what_the_steps_import():
    found = re.search(r"python3 -c '(import [^']+)' \|\| exit 1;", gpu.PREFIX)
    assert found, "the device command has no import check"
    pytest.importorskip("torchao.float8", reason="torchao is not installed here")
    script = (f"{found.group(1)}\nimport sys\n"
              "print(' '.join(sorted(m for m in sys.modules if not m.startswith('_'))))")
    done = subprocess.run([sys.executable, "-c", script], cwd=plan.ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    imported = set(done.stdout.split())
    # ablate's tracking (MLflow's client), the runner (Optuna), the report, MLflow's SQL store, torchao's float8
    needed = {"ablate.tracking.tracker", "mlflow.tracking", "ablate.run.runner", "optuna", "ablate.render.report",
              "sqlalchemy", "alembic", "torchao.float8"}
    assert needed <= imported, needed - imported


def test_l6_pip_check_and_pip_list_come_back_in_the_tarball(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu, "_machine", lambda: "a stand-in GPU")
    steps = {"gpu-tests": StandIn("gpu-tests", 30, "stand-in tests", "pytest")}
    assert gpu._run(["gpu-tests"], 120, "env", tmp_path / "env", tmp_path / "out", steps) == 0
    with tarfile.open(tmp_path / "out" / "gpu-env.tgz") as tar:
        listed = tar.extractfile("env/pip-list.txt").read().decode()
        checked = tar.extractfile("env/pip-check.txt").read().decode()
    assert re.search(r"^torch\s", listed, re.M) and checked.strip()
    assert "pip check (pip-check.txt, with pip list in pip-list.txt): " in (tmp_path / "out" / "summary.md").read_text()

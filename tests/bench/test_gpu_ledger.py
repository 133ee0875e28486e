"""The ledger of GPU steps (benchmarks/gpu/ledger.py): what a lease runs next, and what travels to it (issue 48)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.gpu import ledger
from benchmarks.gpu.ledger import LedgerStep, Run, plan, status
from benchmarks.gpu.steps import PLANNED_STEPS_S, ROOT

H100, H200 = "NVIDIA H100", "NVIDIA H200"
TORCH = "2.11.0+cu130"


def _steps(*planned: int) -> list[LedgerStep]:
    return [LedgerStep(f"s{i}", "a step", "study", [f"s{i}/*.py"], p) for i, p in enumerate(planned)]


def _ran(step: LedgerStep, kind: str, outcome: str = "passed", actual: float | None = None, torch: str = TORCH,
         paths_hash: str = "h") -> None:
    step.runs[kind] = Run("abc1234", "2026-11-27", torch, outcome, step.planned_s, actual, paths_hash)


def _names(steps: list[LedgerStep], kind: str = H100, hashes: dict[str, str] | None = None, torch: str = TORCH,
           budget: float = 1000) -> list[str]:
    return [p.step.name for p in plan(steps, kind, hashes or {s.name: "h" for s in steps}, torch, budget)]


def test_a_finished_step_is_skipped_on_its_kind_but_not_on_another():
    steps = _steps(60, 60, 60)
    _ran(steps[0], H100)
    assert _names(steps, H100) == ["s1", "s2"]
    assert _names(steps, H200) == ["s0", "s1", "s2"]


def test_a_stale_step_reruns_after_the_never_run_ones():
    steps = _steps(60, 60, 60)
    _ran(steps[0], H100)  # first in value, but its paths changed since
    _ran(steps[1], H100, torch="2.10.0")
    hashes = {"s0": "changed", "s1": "h", "s2": "h"}
    assert _names(steps, hashes=hashes) == ["s2", "s0", "s1"]
    assert status(steps[0], H100, hashes, TORCH) == (1, "stale: paths changed since abc1234")
    assert status(steps[1], H100, hashes, TORCH) == (1, "stale: torch changed since abc1234")
    assert steps[0].runs[H100].outcome == "passed"  # its figures stay until a run replaces them


def test_a_stopped_step_reruns_at_once_and_a_failed_one_once_its_paths_change():
    steps = _steps(60, 60, 60)
    _ran(steps[0], H100, "stopped")
    _ran(steps[1], H100, "failed")
    assert _names(steps) == ["s0", "s2"]  # the same code would fail again
    assert _names(steps, hashes={"s0": "h", "s1": "fixed", "s2": "h"}) == ["s0", "s1", "s2"]


def test_the_plan_takes_what_fits_in_order_of_value():
    steps = _steps(100, 300, 100, 100)
    assert _names(steps, budget=300) == ["s0", "s2", "s3"]  # s1 does not fit after s0; the smaller ones after it do
    assert _names(_steps(500, 60), budget=300) == ["s0"]  # too large for any command: alone, held by its limit


def test_a_step_marked_alone_takes_a_command_of_its_own_and_fits_one():
    steps = _steps(100, 250, 30)
    steps[1].alone = True
    assert _names(steps, budget=470) == ["s0", "s2"]  # it waits for a command it can start
    _ran(steps[0], H100)
    assert _names(steps, budget=470) == ["s1"]  # first, then nothing beside it though s2 would fit
    assert ledger.MAX_ALONE_S <= PLANNED_STEPS_S  # a fresh machine's command holds it whole


def test_a_stopped_run_is_no_measure_of_its_price():
    step, power = _steps(400, 400)
    _ran(step, H200, "stopped", actual=200)  # stopped at its limit, 200 s into it
    assert ledger.estimate(step, H200) == 400  # at least its planned figure again, not 200 x HEADROOM
    _ran(power, H200, "passed", actual=200)
    assert ledger.estimate(power, H200) == pytest.approx(250)  # a finished run's duration is its price


def test_estimates_follow_the_recorded_durations():
    fast, slow, new = _steps(100, 100, 100)
    _ran(fast, H200, actual=40)
    _ran(slow, H100, actual=200)
    assert ledger.estimate(fast, H100) == 60  # another kind's run, at least 0.6 of planned
    assert ledger.estimate(slow, H100) == pytest.approx(200 * ledger.HEADROOM)
    _ran(slow, H100, actual=290)
    assert ledger.estimate(slow, H100) == 300  # at most 3 times planned
    overrun = ledger._overrun([fast, slow, new])
    assert overrun == 2.9 and ledger.estimate(new, H100, overrun) == pytest.approx(290)  # the overruns seen, never less


def test_the_ledger_holds_the_truth_the_two_h200_leases():
    steps = ledger.load()
    ran = {(s.name, kind): run for s in steps for kind, run in s.runs.items()}
    assert set(ran) == {(name, H200) for name in ("gpu-tests", "gpu-noise", "mnist-resident", "catalogue-eager",
                                                  "phases")}
    first = ran[("phases", H200)]  # the first lease's: written by hand, its duration never a guess
    assert (first.commit, first.torch, first.outcome, first.actual_s) == ("a057bc7", TORCH, "passed", None)
    assert first.figures and ledger.anchor(first.figures.split("#")[1]) in ledger.anchor(
        "Where the MNIST CNN's step goes on an H200 (issue 40's GPU part; the project's first GPU run)")
    # The second lease's, written by merge from its tarballs: the two studies were stopped at their limits.
    outcomes = {name: run.outcome for (name, _), run in ran.items() if run.commit == "b6f7068d6120"}
    assert outcomes == {"gpu-tests": "passed", "gpu-noise": "passed", "mnist-resident": "stopped",
                        "catalogue-eager": "stopped"}
    assert ran[("gpu-tests", H200)].actual_s == 66 and ran[("mnist-resident", H200)].actual_s == 202


def test_every_step_is_small_its_study_loads_and_its_paths_match_files():
    from ablate.config.study import load

    files = ledger.tree_files(ROOT)
    for step in ledger.load():
        assert step.planned_s <= (ledger.MAX_ALONE_S if step.alone else ledger.MAX_PLANNED_S), step.name
        assert step.planned_s * (PLANNED_STEPS_S // step.planned_s) <= PLANNED_STEPS_S
        for glob in step.paths:
            assert any(ledger._matches(f, [glob]) for f in files), f"{step.name}: {glob} matches nothing"
        if step.study:
            study = load(str(ROOT / step.study), "cuda")
            assert math.prod(len(opts) for _, opts in study.space) <= 16, step.name


def test_the_hash_changes_with_a_matched_file_only(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("1")
    (tmp_path / "b.py").write_text("1")
    before = ledger.paths_hash(["a/**/*.py"], tmp_path)
    (tmp_path / "b.py").write_text("2")
    (tmp_path / "a" / "__pycache__").mkdir()
    (tmp_path / "a" / "__pycache__" / "x.cpython-312.pyc").write_text("bytecode")
    assert ledger.paths_hash(["a/**/*.py"], tmp_path) == before
    (tmp_path / "a" / "x.py").write_text("2")
    assert ledger.paths_hash(["a/**/*.py"], tmp_path) != before


def test_the_ledger_round_trips_and_a_bad_outcome_is_one_line(tmp_path):
    path = tmp_path / "ledger.yaml"
    steps = ledger.load()
    ledger.save(steps, path)
    assert ledger.load(path) == steps
    path.write_text(path.read_text().replace("outcome: passed", "outcome: done", 1))
    with pytest.raises(ValueError, match="outcome 'done'; choose from passed, failed, stopped"):
        ledger.load(path)


@pytest.mark.parametrize(("name", "kind"), [("NVIDIA H100 80GB HBM3", H100), ("NVIDIA H200", H200),
                                            ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
                                            ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4")])
def test_a_device_kind_drops_the_memory_and_keeps_the_form_factor(name, kind):
    assert ledger.device_kind(name) == kind


TRAVEL_LIMIT = 64 * 2**20
WHEELS_BYTES = 40 * 2**20  # device-wheels.sh's carried wheels: about 38 MiB (review gpu-readiness.md, section 4)
DATASETS = ROOT.parent / "shared" / "datasets"


def test_what_travels_to_a_lent_machine_stays_under_64_mib(tmp_path):
    # What a device call carries: the tree git tracks or would add (the ledger's exports included), plus .whl/: the
    # wheels (as packed where .whl/ is here, else their size when last packed) and the data, gzipped as pack does.
    from benchmarks.gpu.__main__ import carried_bytes

    whl = ROOT / ".whl"
    if (whl / "datasets.tgz").exists():
        total = carried_bytes(ROOT)
    else:
        if not DATASETS.exists():
            pytest.skip("../shared/datasets is not beside the checkout")
        import subprocess

        tarball = tmp_path / "datasets.tgz"
        subprocess.run(["tar", "czf", str(tarball), "-C", str(DATASETS.parent), "--exclude=*.md",
                        "--exclude=.ablate-cache", DATASETS.name], check=True)
        total = carried_bytes(ROOT) + tarball.stat().st_size + WHEELS_BYTES
    assert total <= TRAVEL_LIMIT, f"{total / 2**20:.1f} MiB would travel"
    exports = sum(p.stat().st_size for p in Path(ledger.RUNS).rglob("*") if p.is_file())
    assert exports <= 2 * 2**20  # compact: a lease's exports are kilobytes

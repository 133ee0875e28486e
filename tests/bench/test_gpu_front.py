"""RESULTS.md's front page holds the current GPU figures: merge writes the GPU table from the ledger, and a lease's
section that every later run on its kind superseded moves to benchmarks/history/gpu.md (benchmarks/gpu/front.py)."""
from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks.gpu import front, ledger
from benchmarks.sections import RESULTS, retire, rewrite, section_pattern


def _lease(kind: str, title: str, body: str) -> str:
    return f"<!-- bench:{kind}:start (x) -->\n## {title}\n\n{body}\n<!-- bench:{kind}:end -->"


def _ledger(tmp_path: Path, results: Path, figures: dict[str, str]) -> Path:
    """A copy of the ledger whose H200 runs of the steps `figures` names point at `figures[step]`'s heading in
    `results`; the other steps' runs are left out."""
    raw = yaml.safe_load(ledger.LEDGER.read_text())
    for step in raw["steps"]:  # only the steps named keep their runs
        step["runs"] = {kind: {**run, "figures": f"{results}#{ledger.anchor(figures[step['name']])}"}
                        for kind, run in (step.get("runs") or {}).items() if step["name"] in figures}
    path = tmp_path / "ledger.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_the_committed_front_page_shows_the_ledger_s_gpu_runs():
    text = RESULTS.read_text()
    assert front.table(ledger.load(), RESULTS) in text
    assert text.index("bench:front-gpu:start") < text.index("# Sections: CPU")  # on the front page, not below


def test_a_lease_section_whose_steps_all_ran_again_moves_to_the_history(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark records\n\nfront page\n\n" + _lease("gpu-h200-old", "Old lease", "old figures")
                       + "\n\n" + _lease("gpu-h200-mid", "Mid lease", "mid figures") + "\n\nkept\n")
    # gpu-tests ran again in the mid lease, phases in a new one; the old lease's figures are superseded, the mid's not
    ledger_path = _ledger(tmp_path, results, {"gpu-tests": "Mid lease", "phases": "New lease"})
    rewrite(results, "gpu-h200-new", _lease("gpu-h200-new", "New lease", "new figures"))
    assert front.refresh(results, ledger_path, keep="gpu-h200-new") == ["gpu-h200-old"]
    text = results.read_text()
    assert "old figures" not in text and "mid figures" in text and "new figures" in text and "kept" in text
    history = (tmp_path / "history" / "gpu.md").read_text()
    assert history.startswith("# History: GPU sections") and "## Old lease\n\nold figures" in history
    assert "<!-- bench:" not in history  # a record now, which no writer rewrites
    table = section_pattern(front.FRONT).search(text)
    assert table and text.index("front page") > table.start()  # placed under the title where the page had none
    assert "(#mid-lease)" in table.group(0) and "(#new-lease)" in table.group(0)
    assert "| NVIDIA H200 | `gpu-tests`: " in table.group(0)


def test_the_section_just_merged_stays_though_no_run_points_at_it(tmp_path):
    results = tmp_path / "RESULTS.md"
    rewrite(results, "gpu-x", _lease("gpu-x", "A lease without runs.json", "figures"))
    assert front.refresh(results, _ledger(tmp_path, results, {"gpu-tests": "a", "phases": "b"}), keep="gpu-x") == []
    assert "figures" in results.read_text()


def test_retire_moves_a_section_once_and_keeps_everything_else(tmp_path):
    results, history = tmp_path / "RESULTS.md", tmp_path / "history" / "gpu.md"
    results.write_text("# T\n\nbefore\n\n<!-- bench:cuda:start -->\nold cuda\n<!-- bench:cuda:end -->\n\nafter\n")
    assert retire(results, "cuda", history, "# H\n")
    assert not retire(results, "cuda", history, "# H\n")
    assert results.read_text() == "# T\n\nbefore\n\nafter\n"
    assert history.read_text() == "# H\n\nold cuda\n"


def test_the_gpu_make_bench_section_is_linked_from_the_front_page(tmp_path):
    results = tmp_path / "RESULTS.md"
    rewrite(results, "cuda", "<!-- bench:cuda:start x -->\n## `make bench` on CUDA: NVIDIA H100\n\nfigures\n"
                             "<!-- bench:cuda:end -->")
    front.refresh(results, ledger.LEDGER)
    table = section_pattern(front.FRONT).search(results.read_text())
    assert table and "[make bench on CUDA: NVIDIA H100](#make-bench-on-cuda-nvidia-h100)" in table.group(0)


def _tarball(tmp_path: Path, name: str, lease: str, cuda: str) -> Path:
    """A `make gpu` tarball whose scratch folder holds the lease's section and a bench step's cuda section."""
    import tarfile

    scratch = tmp_path / name / "scratch"
    (scratch / "results" / "gpu-noise").mkdir(parents=True)
    (scratch / "section.md").write_text(_lease(lease, f"Lease {lease}", "steps") + "\n")
    (scratch / "results" / "gpu-noise" / "RESULTS.md").write_text(f"# R\n\n{cuda}\n")
    path = tmp_path / f"{name}.tgz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(scratch, arcname="scratch")
    return path


def test_a_rerun_bringing_the_same_bench_section_back_retires_nothing(tmp_path):
    from benchmarks.gpu.bundle import merge

    results, ledger_path = tmp_path / "RESULTS.md", tmp_path / "ledger.yaml"
    results.write_text("# Benchmark records\n\nkept\n")
    ledger_path.write_text(ledger.LEDGER.read_text())
    first = _lease("cuda", "`make bench` on CUDA: NVIDIA H200", "first bench")
    # A rerun on the warm machine reuses the lease's scratch folder, so its tarball holds the first bench's section.
    for name, lease in (("one", "gpu-a"), ("rerun", "gpu-b")):
        merge(_tarball(tmp_path, name, lease, first), results, tmp_path / "unpacked", ledger_path, tmp_path / "runs")
    history = front.history(results)
    assert "first bench" not in (history.read_text() if history.exists() else "")
    assert results.read_text().count("first bench") == 1
    # Power: a later lease's different bench section does move the first to the history.
    second = _lease("cuda", "`make bench` on CUDA: NVIDIA H200", "second bench")
    merge(_tarball(tmp_path, "later", "gpu-c", second), results, tmp_path / "unpacked", ledger_path, tmp_path / "runs")
    assert "first bench" in history.read_text() and "second bench" in results.read_text()

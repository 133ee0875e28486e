"""`make bench` end to end at its smallest, and its rewrite of RESULTS.md in place."""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.__main__ import main
from benchmarks.sections import rewrite as _rewrite

KEPT = "A hand-written record that must survive."


def test_bench_writes_every_section_for_this_device(tmp_path, mnist):
    out = tmp_path / "RESULTS.md"
    out.write_text(f"# Benchmark records\n\n{KEPT}\n")
    tiny = str(Path(__file__).resolve().parent / "studies" / "tiny.yaml")  # mnist_cnn's budget: minutes per trial
    assert main(["--device", "cpu", "--no-grid", "--pairs", "1", "--repeats", "1", "--steps", "3", "--study", tiny,
                 "--output", str(out)]) == 0
    text = out.read_text()
    for heading in ("### 1. Framework overhead", "### 2. Trial start-up", "### 3. Measurement noise",
                    "### 4. Full mnist_cnn grid"):
        assert heading in text
    assert KEPT in text and "torch " in text and "commit " in text


def test_a_second_run_replaces_its_own_section_and_nothing_else(tmp_path):
    out = tmp_path / "RESULTS.md"
    out.write_text(f"# Benchmark records\n\n{KEPT}\n")
    for run in ("first", "second"):
        _rewrite(out, "cpu", f"<!-- bench:cpu:start x -->\n{run} cpu run\n<!-- bench:cpu:end -->")
    _rewrite(out, "cuda", "<!-- bench:cuda:start x -->\ncuda run\n<!-- bench:cuda:end -->")
    text = out.read_text()
    assert KEPT in text and "second cpu run" in text and "first cpu run" not in text and "cuda run" in text
    assert text.count("<!-- bench:cpu:start") == 1


def test_the_grid_section_keeps_the_table_and_the_report_s_answers(tmp_path):
    from benchmarks.__main__ import _grid
    from benchmarks.grid import GridRun

    report = tmp_path / "report.md"
    report.write_text("# r\n\n## Recommendation\n\nfastest: **x**\n\n## Speed-up of every combination\n\nSPEEDUP-BODY\n\n"
                      "## What each technique is worth\n\n![plot](effects.png)\n\n| technique |\n\n## One-off costs\n\nno\n")
    output = ("mnist_cnn: 4 combinations (grid) on cpu\n#0 baseline: complete\n"
              "combination    state     samples/s    reason\n-----------    -----     ---------    ------\n"
              "baseline       complete  1000.0\npin_memory     skipped                pinned memory needs a GPU\n\n"
              "results table: x.csv\n")
    lines = "\n".join(_grid(GridRun(754.4, output, tmp_path, report)))
    assert "**12 min 34 s**" in lines
    assert "baseline       complete  1000.0" in lines and "pinned memory" not in lines and "1 skipped rows" in lines
    assert "### Recommendation" in lines and "fastest: **x**" in lines and "| technique |" in lines
    assert "SPEEDUP-BODY" not in lines and "![plot]" not in lines and "One-off" not in lines


def test_the_reproducibility_check_compares_runs_by_their_combined_standard_errors():
    import math

    from benchmarks.reproducibility import compare

    def summary(pick: str, entries: dict[str, tuple[float, float]], raced: str = "") -> dict:
        rows = [{"combination": c, "speedup": s, "log_se": se, "low": s * math.exp(-2 * se),
                 "high": s * math.exp(2 * se), "phase": "race" if c == raced else "screen"}
                for c, (s, se) in entries.items()]
        return {"speedups": rows, "recommendation": next(r for r in rows if r["combination"] == pick)}

    first = summary("a", {"a": (1.50, 0.05), "b": (1.20, 0.05), "c": (0.90, 0.05)})
    second = summary("a", {"a": (1.45, 0.05), "b": (1.20, 0.05), "c": (1.30, 0.05)})  # c moved far
    found = compare(first, second)
    assert (found.agreeing, found.compared) == (2, 3)
    assert found.recommendation_agrees == (True, True)
    assert found.widths[0] == pytest.approx(math.exp(0.2))
    assert found.chi2 == pytest.approx((math.log(1.5 / 1.45) ** 2 + math.log(0.9 / 1.3) ** 2) / (2 * 0.05 ** 2))
    assert found.chi2_screened == (pytest.approx(found.chi2), 3)
    raced = compare(first, summary("a", {"a": (1.45, 0.05), "b": (1.20, 0.05), "c": (1.30, 0.05)}, raced="c"))
    assert raced.chi2_screened == (pytest.approx(math.log(1.5 / 1.45) ** 2 / (2 * 0.05 ** 2)), 2)  # c left out
    other = summary("b", {"a": (1.10, 0.01), "b": (1.60, 0.01), "c": (0.90, 0.01)})
    assert compare(first, other).recommendation_agrees == (False, False)  # each pick is elsewhere in the other


def test_the_window_length_benchmarks_interval_for_the_trial_to_trial_spread_covers_at_its_level():
    """Log throughputs drawn normal with a known spread: the chi-square interval covers it in 95% of runs."""
    import math
    import random

    from benchmarks.window_length import spread

    rng, truth, runs = random.Random(3), 0.08, 2_000
    covered = 0
    for _ in range(runs):
        found = spread([math.exp(rng.gauss(math.log(600), truth)) for _ in range(10)])
        covered += found.low <= truth <= found.high
        assert found.low < found.sd < found.high
    assert 0.93 <= covered / runs <= 0.97

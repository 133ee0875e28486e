"""`make bench` end to end at its smallest, and its rewrite of RESULTS.md in place."""
from __future__ import annotations

import pytest

from ablate import data
from benchmarks.__main__ import _rewrite, main

KEPT = "A hand-written record that must survive."


def test_bench_writes_every_section_for_this_device(tmp_path):
    try:
        data.load("mnist")
    except data.DataUnavailable as error:
        pytest.skip(f"MNIST not available: {error}")
    out = tmp_path / "RESULTS.md"
    out.write_text(f"# Benchmark records\n\n{KEPT}\n")
    assert main(["--device", "cpu", "--no-grid", "--pairs", "1", "--repeats", "1", "--steps", "3", "--output", str(out)]) == 0
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

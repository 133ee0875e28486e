"""`ablate list`: what a new user reads first to write a study file."""
from __future__ import annotations

import subprocess
import sys

from ablate.cli import main
from strategies import PRESETS, REGISTRY


def test_list_names_studies_strategies_and_presets_with_study_lines_that_fit(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    studies, rest = out.split("strategies:")
    assert "mnist_cnn" in studies and all(len(line) <= 100 for line in studies.splitlines()), studies
    strategies, presets = rest.split("presets (")
    assert all(f"  {name} " in strategies for name in REGISTRY)
    assert all(f"  {name} " in presets for name in PRESETS)
    assert "HalfPrecision(dtype='fp16', master_weights=True)" in presets


def test_list_into_a_closed_pipe_is_quiet():
    reader = subprocess.Popen([sys.executable, "-m", "ablate", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.close()  # like `ablate list | head -0`: gone before the first line is written
    err = reader.stderr.read().decode()
    assert reader.wait() == 141 and "Traceback" not in err, err

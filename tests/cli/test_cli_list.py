"""`ablate list`: what a new user reads first to write a study file."""
from __future__ import annotations

import subprocess
import sys

from ablate.cli import main
from strategies import PRESETS, REGISTRY


def test_list_names_studies_strategies_and_presets_in_lines_that_fit_100_columns(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    studies, rest = out.split("strategies:")
    assert "mnist_cnn" in studies and all(len(line) <= 100 for line in out.splitlines()), out
    strategies, presets = rest.split("presets (")
    assert all(f"  {name} " in strategies for name in REGISTRY)
    assert all(f"  {name} " in presets for name in PRESETS)
    assert "HalfPrecision(dtype='fp16', master_weights=True)" in presets


def test_list_into_a_closed_pipe_is_quiet():
    reader = subprocess.Popen([sys.executable, "-m", "ablate", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.close()  # like `ablate list | head -0`: gone before the first line is written
    err = reader.stderr.read().decode()
    assert reader.wait() == 141 and "Traceback" not in err, err


HEAVY = {"torch", "torchao", "mlflow", "scipy", "optuna", "transformers", "strategies"}


def _imported(*command: str) -> tuple[set[str], str]:
    """The top-level packages `python -X importtime -m ablate COMMAND` imported, and what it printed."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "ablate", *command], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {name.split(".")[0] for name in lines}, done.stdout


def test_list_reads_the_files_and_imports_no_torch_torchao_mlflow_or_scipy():
    imported, out = _imported("list")
    assert "ablate" in imported and "yaml" in imported  # the listing is read as it should be
    assert imported & HEAVY == set()
    assert "mnist_cnn" in out and "  set_to_none " in out


def test_help_imports_no_torch_either():
    imported, out = _imported("run", "--help")
    assert "--device" in out and imported & HEAVY == set()


def test_list_prints_nothing_on_stderr():
    done = subprocess.run([sys.executable, "-m", "ablate", "list"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr

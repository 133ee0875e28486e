"""The suite does not depend on the shell it runs in: a user's MLflow store, its terminal width, or SIGINT ignored
(a background job)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sees_no_user_mlflow_settings():
    assert not [name for name in os.environ if name.startswith("MLFLOW_")]


def test_sees_no_terminal_width():
    assert "COLUMNS" not in os.environ  # ablate wraps its output to it; the tests read it as a pipe does


def test_sigint_raises_keyboard_interrupt():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell does for a background job (`make test &`)


def test_tests_pass_with_a_foreign_mlflow_store_and_sigint_ignored(tmp_path):
    foreign = tmp_path / "foreign.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{foreign}", "COLUMNS": "40"}
    selected = ["tests/run/test_deferred_interrupts.py",
                "tests/architecture/test_hermetic.py::test_sees_no_user_mlflow_settings",
                "tests/architecture/test_hermetic.py::test_sigint_raises_keyboard_interrupt",
                "tests/architecture/test_hermetic.py::test_sees_no_terminal_width"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *selected], cwd=ROOT,
                          env=env, preexec_fn=_ignore_sigint, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not foreign.exists()  # nothing was written to the user's store

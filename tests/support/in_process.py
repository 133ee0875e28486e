"""`ablate ARGS` run by `ablate.cli.main` inside the test's process, answering as `subprocess.run` would.

A fresh `python -m ablate` pays the CLI's imports (torch among them: seconds on 2 cores) for every case. Tests of
bad input that only check the message, the exit status and that nothing was written run most cases here: the same
working directory, the same environment (read where the CLI reads it, at the call), the results default of
ABLATE_RESULTS_DIR, and argparse's own exit as the status. Each kind of check keeps at least one case in a real
subprocess, where the process boundary (the real entry point's exit status, nothing written) is what is tested.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def ablate(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, cwd: Path,
           **env: str) -> subprocess.CompletedProcess:
    """`main(args)` in `cwd` with `env` set: its exit status and what it printed, as a `CompletedProcess`."""
    from ablate import cli

    monkeypatch.chdir(cwd)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if "ABLATE_RESULTS_DIR" in env:  # read once, when ablate.cli is imported: as a fresh process would read it
        monkeypatch.setattr(cli, "RESULTS_DIR", Path(env["ABLATE_RESULTS_DIR"]))
    capsys.readouterr()  # what the test printed before is not the command's
    try:
        code = cli.main(list(args))
    except SystemExit as exit_:  # argparse's errors exit, as they do from the real entry point
        code = exit_.code if isinstance(exit_.code, int) else 1
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["ablate", *args], code, out.out, out.err)

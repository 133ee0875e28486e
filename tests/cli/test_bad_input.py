"""Bad input through the CLI: exit status 2, one line on stderr naming the problem, no traceback, nothing written."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from in_process import ablate
from messages import one_message

from ablate.cli import main

from bad_studies import BAD  # the study-file cases the loader rejects: each must reach the user the same way

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
MORE = {
    "tolerance out of range": (TINY.read_text().replace("accuracy_tolerance: 2.0", "accuracy_tolerance: -1"),
                               "accuracy_tolerance must be"),
    "target above 100": (TINY.read_text().replace("target_accuracy: 99.0", "target_accuracy: 150"), "at most 100"),
    "unknown device section": (TINY.read_text() + "devices: {tpu: {}}\n", "unknown key 'tpu'; valid: cpu, cuda"),
    "wrong type of option": (TINY.read_text().replace("{n: 1}", "{n: one}"), "num_workers"),
    "unknown protocol key": (TINY.read_text().replace("  contenders: 2", "  contendrs: 2"),
                             "protocol: unknown key 'contendrs'; valid: block_size, confirm_blocks, contenders"),
    "negative race blocks": (TINY.read_text().replace("race_blocks: 1", "race_blocks: -1"), "must be >= 0"),
    "zero block size": (TINY.read_text().replace("block_size: 2", "block_size: 0"), "block_size: must be > 0"),
    "a dimension without off": (TINY.read_text().replace("[off, pin_memory]", "[pin_memory]"),
                                "no `off` among the choices (pin_memory); every dimension needs one"),
}


def _one_line(err: str, expected: str) -> None:
    said = one_message(err)  # one message, wrapped at 100 columns
    assert expected in said and said.startswith("ablate: error: "), err
    assert "Traceback" not in err


@pytest.mark.parametrize("case", [*BAD, *MORE])
def test_a_bad_study_file_through_the_cli(case, tmp_path, capsys):
    text, expected = {**BAD, **MORE}[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    results = tmp_path / "results"
    for command in ("run", "report", "sync"):
        assert main([command, str(path), "--device", "cpu", "--results", str(results)]) == 2
        _one_line(capsys.readouterr().err, expected)
    assert not results.exists()


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ablate", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **env})


@pytest.fixture
def in_process(monkeypatch, capsys):
    """`_cli`'s answer from `main` in this process (tests/support/in_process.py), without a fresh interpreter's
    imports: for the cases past the first of each kind, which keeps the real entry point in a fresh process."""
    return functools.partial(ablate, monkeypatch, capsys)


def test_a_yaml_tag_that_would_run_python_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(f"!!python/object/apply:os.system ['touch {marker}']\n")
    done = _cli("run", str(path), "--device", "cpu", "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert done.returncode == 2
    _one_line(done.stderr, "not valid YAML at line 1: could not determine a constructor for the tag")
    assert not marker.exists() and not (tmp_path / "results").exists()


def test_an_unwritable_results_folder_is_one_line_before_anything_is_written(tmp_path, in_process):
    # Tests run as root, whom permissions do not stop: a folder below a regular file cannot be created by anyone.
    # `run`'s exit status from a fresh process: test_bad_run_options_are_one_line_and_write_nothing's first case.
    (tmp_path / "afile").write_text("not a folder")
    done = in_process("run", str(TINY), "--device", "cpu", "--results", str(tmp_path / "afile" / "sub"), cwd=tmp_path)
    assert done.returncode == 2
    _one_line(done.stderr, f"results folder {tmp_path / 'afile' / 'sub'} cannot be created")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "not a folder"


@pytest.mark.slow
def test_an_empty_data_folder_offline_is_one_line_naming_the_files_and_the_variable(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    # No download either, even on a machine with internet: every request goes to a closed proxy.
    done = _cli("run", str(TINY), "--device", "cpu", "--results", str(tmp_path / "results"), cwd=tmp_path,
                ABLATE_DATA_DIR=str(empty), http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
                HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    assert done.returncode == 2
    _one_line(done.stderr, "MNIST is not in")
    assert "train-images-idx3-ubyte" in done.stderr and "ABLATE_DATA_DIR" in done.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("argv", [["worker", str(TINY), "--storage", "sqlite:///x.db"],
                                  ["run", str(TINY), "--workers", "2"]])
def test_several_workers_refuse_sqlite(argv, tmp_path, capsys):
    assert main([*argv, "--device", "cpu", "--results", str(tmp_path / "results")]) == 2
    _one_line(capsys.readouterr().err, "several workers need a server database")
    assert not (tmp_path / "results").exists()


def _nothing_written(cwd: Path, done: subprocess.CompletedProcess, expected: str) -> None:
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, expected)
    assert list(cwd.iterdir()) == [], list(cwd.iterdir())


@pytest.mark.parametrize("args, expected", [
    (["--trials", "3"], "--trials applies to --search optuna; the grid runs all 8 combinations of tiny"),
    (["--results", "/proc/x/results"],
     "results folder /proc/x/results cannot be created: /proc does not allow new folders"),
    (["--storage", "sqlite:////proc/x/optuna.db"], "storage folder /proc/x cannot be created"),
    (["--storage", "optuna.db"], "--storage 'optuna.db' is not a database URL; give sqlite:///PATH or postgresql://"),
    (["--storage", "postgres1://h/db"], "unknown database 'postgres1'; choose one of: sqlite, postgresql, mysql"),
    (["--storage", "postgresql://ablate:secret@127.0.0.1:9/db"],
     "--storage postgresql://ablate:***@127.0.0.1:9/db cannot be opened (connection failed"),
    (["--device", "cdua"], "unknown device 'cdua'; choose one of: cpu, cuda[:N]; did you mean 'cuda'?"),
    (["--search", "optna"],
     "unknown choice 'optna'; choose one of: grid, optuna; did you mean 'optuna'? (see ablate run --help)"),
])
def test_bad_run_options_are_one_line_and_write_nothing(args, expected, tmp_path, in_process):
    # The default results folder is the working directory's: nothing may appear there either. The first case
    # through the real entry point in a fresh process, the others through the same `main` in this one.
    cli = _cli if args[0] == "--trials" else in_process
    done = cli("run", str(TINY), "--device", "cpu", *args, cwd=tmp_path, ABLATE_RESULTS_DIR=str(tmp_path / "results"))
    _nothing_written(tmp_path, done, expected)


@pytest.mark.parametrize("args, expected", [
    (["run", "mnist_cn"], "unknown study 'mnist_cn'; choose one of: gpt_kjv, llama_tiny, mnist_cnn, mnist_cnn_gpu"),
    (["rn", "mnist_cnn"], "unknown choice 'rn'; choose one of: compare, diagnose, list, new, report, run, sync, ui, "
                          "worker; did you mean 'run'? (see ablate --help)"),
    (["report", str(TINY), "--storage", "nowhere"], "--storage 'nowhere' is not a database URL"),
    (["run", str(TINY), "--trails", "3"],
     "unknown option '--trails'; choose one of: --device, --explain, --full-table, --quick, --results, "
     "--search, --single-pass, --storage, --trials, --workers, -h; did you mean "
     "'--trials'? "
     "(see ablate run --help)"),
    (["ui", "--prot", "5001"], "did you mean '--port'? (see ablate ui --help)"),
])
def test_names_and_commands_suggest_the_nearest(args, expected, tmp_path, in_process):
    # An error `main` returns and one argparse exits with, each from a fresh process; the others in this one.
    cli = _cli if args[0] in ("run", "rn") and args[1].startswith("mnist_cn") else in_process
    done = cli(*args, cwd=tmp_path, ABLATE_RESULTS_DIR=str(tmp_path / "results"))
    _nothing_written(tmp_path, done, expected)


def test_ui_on_a_busy_port_names_the_port_and_the_flag(tmp_path, in_process):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = in_process("ui", "--port", str(port), "--results", str(tmp_path / "results"), cwd=tmp_path)
    _nothing_written(tmp_path, done, f"port {port} on 127.0.0.1 cannot be opened (Address already in use); "
                                     f"choose another with --port, e.g. ablate ui --port {port + 1}")

"""Library messages - Python warnings, and loggers that print with handlers of their own as torch's, Optuna's
and MLflow's do - go to a log file in every command, never into the user's terminal: the study's log once the
study is known, else the results folder's own (made only when a library said something)."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ablate.trial import library_log

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
# Each command's function is wrapped: before it runs, a library warns and a library logger with a terminal
# handler of its own (propagate off, as torch's and Optuna's, configured when the library was imported) says
# something, as torchao did in the middle of `ablate list`.
NOISY = """
import logging, sys, warnings
from ablate import cli

logger = logging.getLogger("somelibrary")
logger.addHandler(logging.StreamHandler(sys.stderr))
logger.propagate = False

def noisy(command):
    def run(args):
        warnings.warn("a library's warning", UserWarning)
        logger.warning("a library logger's message")
        return command(args)
    return run

for name in ("_list", "_run", "_report", "_sync", "_new", "_diagnose", "_ui"):
    setattr(cli, name, noisy(getattr(cli, name)))
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("command", "log"), [
    (["list"], ""),  # names no study: the results folder's log
    (["new", "no_such_model"], ""),
    (["diagnose", "no_such_model"], ""),  # names neither a study nor a model: the results folder's log
    (["run", str(TINY), "--device", "nowhere"], ""),  # refused before its study is read
    (["report", str(TINY)], "tiny"),  # the study's log, though it has nothing stored yet
    (["sync", str(TINY)], "tiny"),
])
def test_every_command_sends_library_messages_to_the_log_not_the_terminal(command, log, tmp_path):
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-c", NOISY, *command], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "ABLATE_RESULTS_DIR": str(results)})
    said = done.stdout + done.stderr
    assert "a library" not in said and "Traceback" not in said, said
    text = (results / log / library_log.LOG_NAME).read_text()
    assert "UserWarning: a library's warning" in text and "a library logger's message" in text


def test_held_messages_go_to_the_log_the_command_names_and_later_ones_too(tmp_path):
    library_log.hold()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("before the study was read", UserWarning)
            logging.getLogger("some.library").warning("held too")
            log = library_log.to_log_file(tmp_path / "study" / library_log.LOG_NAME, lazy=True)
            warnings.warn("after", UserWarning)
        text = log.read_text()
        assert "before the study was read" in text and "held too" in text and "after" in text
    finally:
        library_log.settle(tmp_path / "unused" / library_log.LOG_NAME)
        logging.getLogger().removeHandler(next(h for h in logging.getLogger().handlers
                                               if h.get_name() == library_log.HANDLER))
        logging.captureWarnings(False)
    assert not (tmp_path / "unused").exists()


def test_a_command_where_no_library_spoke_makes_no_log(tmp_path):
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "ablate", "list"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "ABLATE_RESULTS_DIR": str(results)})
    assert done.returncode == 0 and not results.exists()


@pytest.mark.slow
def test_a_study_file_for_a_library_model_is_written_with_one_line_in_the_terminal(tmp_path):
    """`ablate new hf:gpt2` imports torch, transformers and (through the strategies) torchao, whose import logs
    warnings through torch's own stderr handler: the terminal gets the one line that says what was written."""
    out = tmp_path / "gpt2.yaml"
    done = subprocess.run([sys.executable, "-m", "ablate", "new", "hf:gpt2", "--out", str(out)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "ABLATE_RESULTS_DIR": str(tmp_path / "results")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"wrote {out}; edit it, then run it with: ablate run {out}"]
    assert done.stderr == ""


# A library imported in the middle of a command, after its log was named: it makes its logger then, gives it a
# terminal handler of its own and turns propagation off afterwards (as transformers does), and speaks.
LATE = """
import logging, sys
from pathlib import Path
from ablate.trial import library_log

library_log.hold()
log = library_log.to_log_file(Path(sys.argv[1]), lazy=True)

logger = logging.getLogger("alatelibrary")  # imported only now
own = logging.StreamHandler(sys.stderr)
logger.addHandler(own)
logger.propagate = False
logger.warning("a late library's message")
logging.getLogger("alatelibrary.child").error("its child's message")
logger.removeHandler(own)  # the library takes its handler back: it is gone
assert not logger.handlers, logger.handlers
"""


def test_a_library_imported_after_the_log_is_named_logs_to_it_not_the_terminal(tmp_path):
    log = tmp_path / "results" / library_log.LOG_NAME
    done = subprocess.run([sys.executable, "-c", LATE, str(log)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert "message" not in done.stderr, done.stderr
    text = log.read_text()
    assert text.count("a late library's message") == 1 and text.count("its child's message") == 1, text


# A process that runs commands one after another (a test session, a notebook): around each, someone adds a handler to
# a library logger made before any command and takes it back after (pytest's log capture does so on every logger with
# propagation off). Each command claims what prints; taken back by the handler added, the claimed one must go too.
TAKEN_BACK = """
import logging, sys
from ablate.trial import library_log

logger = logging.getLogger("anearlylibrary")  # made before any command: not of the claiming class
logger.propagate = False
for command in range(3):
    visitor = logging.StreamHandler(sys.stderr)
    logger.addHandler(visitor)
    library_log.hold()  # claims the visitor: it prints to the terminal
    assert logger.handlers[0] is not visitor and logger.handlers[0] == visitor, logger.handlers
    logger.removeHandler(visitor)
    assert not logger.handlers, (command, logger.handlers)
"""


def test_a_handler_taken_back_after_a_command_claimed_it_is_gone_not_left_to_pile_up(tmp_path):
    done = subprocess.run([sys.executable, "-c", TAKEN_BACK], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr

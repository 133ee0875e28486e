"""`--quick` and `--single-pass`: a cheaper design than the whole table, one at a time, passed on to the workers
`run --workers N` starts, and run under the protocol it names."""
from __future__ import annotations

from pathlib import Path

import pytest

from ablate import cli_parser
from ablate.config.design import ProtocolSettings, chosen


def _args(*options: str):
    return cli_parser.parse(["run", "tiny", *options], Path("results"))


def test_each_design_option_is_passed_on_to_the_workers_as_given():
    assert cli_parser.design_flags(_args()) == ()
    assert cli_parser.design_flags(_args("--quick")) == ("--quick",)
    assert cli_parser.design_flags(_args("--single-pass")) == ("--single-pass",)


def test_quick_and_single_pass_together_are_refused(capsys):
    with pytest.raises(SystemExit) as stopped:
        _args("--quick", "--single-pass")
    assert stopped.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_the_protocol_each_option_runs_under():
    own = ProtocolSettings(seeds=4)
    assert chosen(own) is None  # the study file's own: the whole table
    assert chosen(own, quick=True) == ProtocolSettings(seeds=4, quick=True)
    single = chosen(own, single=True)
    assert single is not None and single.design == "single pass" and own.design == "whole table"

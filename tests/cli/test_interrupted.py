"""Ctrl-C outside a run's measurements (as it starts, or while a report is written): one line, exit status 130, no
traceback; a run's line says it resumes, and it does: the study is not left locked."""
from __future__ import annotations

from pathlib import Path

from messages import one_message

from ablate import cli
from ablate.run import header

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def test_ctrl_c_as_a_run_starts_is_one_line_and_the_study_stays_free(tmp_path, mnist, monkeypatch, capsys):
    reached = []

    def stopped(runner, *args, **kwargs):
        reached.append(runner)
        raise KeyboardInterrupt

    monkeypatch.setattr(header, "header", stopped)
    run = ["run", str(TINY), "--device", "cpu", "--results", str(tmp_path / "results")]
    for _ in range(2):  # the second finds the study free: the first let its lock go
        assert cli.main(run) == 130
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert one_message(err) == "ablate: interrupted; run the same command again: it resumes where it stopped"
    assert len(reached) == 2


def test_ctrl_c_in_a_report_says_no_more_than_that(tmp_path, monkeypatch, capsys):
    def stopped(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_report", stopped)
    assert cli.main(["report", str(TINY), "--device", "cpu", "--results", str(tmp_path / "results")]) == 130
    assert one_message(capsys.readouterr().err) == "ablate: interrupted"

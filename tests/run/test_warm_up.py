"""The warm-up trial: before a run's first measurement, the baseline once in a trial interpreter, said and thrown
away - never stored, never in a statistic; a warm-up that fails is said and the run goes on."""
from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest
from tiny_mnist import tiny_text

from ablate.cli import main
from ablate.config import study as studies
from ablate.config.validate import StudyError
from ablate.run import runner
from ablate.trial.process import TrialFailed

STAND_IN = Path(__file__).resolve().parents[1] / "studies" / "stand_in.yaml"
SAID = "warm-up trial of the baseline, thrown away: "


def _study(tmp_path: Path, trials: int) -> Path:
    """stand_in.yaml (two combinations, stand-in data) with `trials` warm-up trials, screening only."""
    text = STAND_IN.read_text().replace("  warm_up_trials: 0", f"  warm_up_trials: {trials}")
    assert f"warm_up_trials: {trials}" in text
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "stand_in.yaml"
    path.write_text(text.replace("  race_blocks: 1", "  race_blocks: 0"))
    return path


def _stored(results: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name="stand_in:grid:cpu",
                             storage=f"sqlite:///{results / 'stand_in' / 'optuna.db'}").get_trials()


@pytest.mark.slow
def test_the_baseline_runs_once_before_the_first_measurement_and_is_neither_stored_nor_counted(tmp_path, capsys,
                                                                                                monkeypatch):
    ran: list[object] = []
    real = runner.run_in_fresh_process
    monkeypatch.setattr(runner, "run_in_fresh_process",
                        lambda spec, **kw: ran.append(spec) or real(spec, **kw))
    assert main(["run", str(_study(tmp_path, 1)), "--device", "cpu", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert len(ran) == 1 and not ran[0].train_for_accuracy  # type: ignore[attr-defined]
    assert ran[0].study.budget.profile_steps == 0  # type: ignore[attr-defined]  # nothing reads its profile
    [said] = [line for line in out.splitlines() if line.startswith(SAID)]
    assert said.endswith("samples/s")
    assert out.index(SAID) < out.index("#0 ")  # before the first measurement
    stored = _stored(tmp_path)
    printed = [line for line in out.splitlines() if re.match(r"#\d+ block ", line)]
    assert len(stored) == len(printed)  # every stored trial is a measurement the run printed, none a warm-up


@pytest.mark.slow
def test_a_warm_up_that_fails_is_said_and_the_run_goes_on(tmp_path, capsys, monkeypatch):
    def fails(spec, **kw):
        raise TrialFailed("the baseline could not start")

    monkeypatch.setattr(runner, "run_in_fresh_process", fails)
    assert main(["run", str(_study(tmp_path, 1)), "--device", "cpu", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{SAID}failed (the baseline could not start); measuring anyway" in out
    assert all(t.user_attrs["state"] == "complete" for t in _stored(tmp_path))


def test_none_where_the_study_asks_for_none_and_a_negative_count_is_refused(tiny_study_run, tmp_path):
    # The session's run of tiny.yaml (tests/conftest.py), which asks for none: every warm-up says SAID, run or failed.
    assert "warm_up_trials: 0" in tiny_text()
    assert SAID not in tiny_study_run[1]
    bad = tmp_path / "bad.yaml"
    bad.write_text(_study(tmp_path / "b", 0).read_text().replace("warm_up_trials: 0", "warm_up_trials: -1"))
    with pytest.raises(StudyError, match="warm_up_trials: must be >= 0"):
        studies.load(str(bad), "cpu")

"""`ablate.run.bitwise`: which accuracy groups train bitwise as their core here, and a study that trains them once."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ablate.cli import main
from ablate.config import study as studies
from ablate.config.choices import Option, accuracy_group
from ablate.config.design import TABLE, ProtocolSettings
from ablate.run import bitwise
from ablate.stats.planner import Planner
from ablate.stats.race import finalists
from ablate.store import records, study_record
from ablate.trial.process import TrialSpec
from strategies import AMP, SetToNone

STUDY = Path(__file__).resolve().parents[1] / "studies" / "tiny_bitwise.yaml"
BF16 = Option("amp", (("dtype", "bf16"),))
TORCHSCRIPT = Option("torchscript")


def _planner() -> Planner:
    return Planner(studies.load(str(STUDY), "cpu"), ProtocolSettings(), 0, "cpu", "test cpu")


def test_each_group_with_a_strategy_that_may_be_bitwise_equal_is_checked_against_its_core():
    found = bitwise.candidates(_planner().runnable_combinations(), accuracy_group)
    assert found == {"torchscript": ((TORCHSCRIPT,), (), "baseline"),
                     "amp(dtype=bf16) + torchscript": ((BF16, TORCHSCRIPT), (BF16,), "amp(dtype=bf16)")}


@pytest.mark.parametrize("found, trains_as, says", [
    ({"control_equal": 1.0, "equal": 1.0, "steps": 8.0, "largest_difference": 0.0}, "amp(dtype=bf16)",
     "bitwise equal to amp(dtype=bf16) after 8 training steps"),
    ({"control_equal": 1.0, "equal": 0.0, "steps": 8.0, "largest_difference": 0.25}, "g",
     "differs from amp(dtype=bf16) (largest weight difference 0.25 after 8 steps)"),
    # Equal to the core, but the core differed from itself: nothing can be told, the group stays apart.
    ({"control_equal": 0.0, "equal": 1.0, "steps": 8.0, "largest_difference": 0.0}, "g",
     "not told: amp(dtype=bf16) itself did not train bitwise alike twice here"),
])
def test_a_group_trains_as_its_core_only_when_equal_and_the_control_is(found, trains_as, says):
    check = bitwise.answer("g", "amp(dtype=bf16)", found)
    assert (check.trains_as, check.why) == (trains_as, says)


def _spec(*options: Option) -> TrialSpec:
    return TrialSpec(studies.load(str(STUDY), "cpu"), options, "cpu", train_for_accuracy=False)


def test_the_probe_finds_a_strategy_that_leaves_the_numbers_bitwise_equal(mnist, monkeypatch):
    # SetToNone must leave every loss bitwise as it is (tests/strategies/test_numerics.py): flagged as a candidate,
    # it is one.
    monkeypatch.setattr(SetToNone, "changes_numerics", True)
    monkeypatch.setattr(SetToNone, "may_be_bitwise_equal", True)
    found = bitwise.probe(_spec(Option("set_to_none")), core=())
    assert found["control_equal"] == 1.0 and found["equal"] == 1.0 and found["largest_difference"] == 0.0


def test_the_probe_finds_a_strategy_that_changes_the_numbers(mnist, monkeypatch):
    monkeypatch.setattr(AMP, "may_be_bitwise_equal", True)  # bf16 autocast rounds the convolutions
    found = bitwise.probe(_spec(BF16), core=())
    assert found["control_equal"] == 1.0 and found["equal"] == 0.0 and found["largest_difference"] > 0


@pytest.fixture(scope="module")
def bitwise_run(tmp_path_factory, mnist):
    results = tmp_path_factory.mktemp("results")
    assert main(["run", str(STUDY), "--device", "cpu", "--results", str(results)]) == 0
    study = optuna.load_study(study_name="tiny_bitwise:grid:cpu",
                              storage=f"sqlite:///{results / 'tiny_bitwise' / 'optuna.db'}")
    return results, study


@pytest.mark.slow
def test_groups_train_as_the_check_found_and_accuracy_is_trained_once_per_merged_group(bitwise_run):
    results, study = bitwise_run
    (device, answers), = study_record.from_study(study).bitwise.items()
    assert set(answers) == {"torchscript", "amp(dtype=bf16) + torchscript"}
    trains_as = {group: answer[0] for group, answer in answers.items()}
    trials = [records.from_trial(t) for t in study.get_trials()]
    measured = [r for r in trials if r.state == "complete"]
    for r in measured:  # every measurement trains, or borrows, as the group the check gave it
        mine = " + ".join(label for label in (r.levels["amp"], r.levels["graph"]) if label != "off") or "baseline"
        assert r.accuracy_group == trains_as.get(mine, mine)
    groups = {trains_as.get(g, g)
              for g in ("baseline", "amp(dtype=bf16)", "torchscript", "amp(dtype=bf16) + torchscript")}
    trained = [r for r in measured if r.accuracy_trained]
    # Once per merged group and seed, never twice; which groups the answer trains depends on this machine's
    # throughputs (race first, accuracy where it decides): always the baseline's, and the leader's beside it at both
    # seeds unless the leader trains as the baseline does (then nothing is judged: the baseline's own accuracy, once).
    # The table then trains every other merged group once, at the first seed.
    by_seed: dict[int, list[str]] = {}
    for r in trained:
        if r.phase != TABLE:
            by_seed.setdefault(r.seed_index, []).append(r.accuracy_group)
    table = [r.accuracy_group for r in trained if r.phase == TABLE]
    assert all(r.seed_index == 0 for r in trained if r.phase == TABLE)
    assert sorted(table) == sorted(groups - set(by_seed[0]))  # every merged group trained, once
    assert all(len(g) == len(set(g)) and set(g) <= groups for g in by_seed.values())
    stored = records.load(study)
    tiny = studies.load(str(STUDY), "cpu")
    leader = finalists.final(stored, tiny.accuracy_tolerance, tiny.protocol).standing.leader
    lead_group = next(finalists.group_of(r) for r in stored if r.combination == leader)
    if lead_group == "baseline":
        assert by_seed == {0: ["baseline"]}
    else:
        assert sorted(by_seed[0]) == sorted(by_seed[1]) and {"baseline", lead_group} <= set(by_seed[0])
    for r in (r for r in stored if r.complete):  # a combination's accuracy: its group's, at the run's seed, or none
        donor = next((d for d in trained if d.accuracy_group == r.accuracy_group and not d.seed_index), None)
        if donor is None:
            assert r.accuracy is None
        else:
            assert r.accuracy == donor.accuracy and r.accuracy_from == donor.number
    report = (results / "tiny_bitwise" / "report" / "grid" / "report.md").read_text()
    assert "checked for bitwise equality with their core" in report
    for group, (into, why) in answers.items():
        assert why in report
        assert (f"**{group}** trained as {into}" if into != group else f"{group} trained apart") in report


@pytest.mark.slow
def test_a_resume_checks_nothing_again(bitwise_run, capsys):
    results, study = bitwise_run
    before = study_record.from_study(study).bitwise
    assert main(["run", str(STUDY), "--device", "cpu", "--results", str(results)]) == 0
    assert study_record.from_study(study).bitwise == before
    assert "accuracy group torchscript:" not in capsys.readouterr().out


@pytest.mark.slow
def test_a_group_that_differs_keeps_its_own_accuracy(tmp_path, mnist, monkeypatch):
    differs = {"control_equal": 1.0, "equal": 0.0, "steps": 8.0, "largest_difference": 0.5}
    probes: list[object] = []
    monkeypatch.setattr(bitwise, "run_in_fresh_process", lambda *args, **kwargs: probes.append(args) or dict(differs))
    # Screening only, at two seeds: the cheapest protocol that still checks (a single pass at one seed skips the
    # check, ablate.run.runner); which group a measurement trains as is the check's answer whatever the protocol,
    # and the raced protocol, where groups merge, is the module's run (test_groups_train_as_the_check_found_...).
    cheap = tmp_path / "tiny_bitwise.yaml"
    cheap.write_text(STUDY.read_text().split("protocol:")[0] + "protocol: {race_blocks: 0, warm_up_trials: 0, "
                     "screen_baselines: 1, seeds: 2}\naccuracy_tolerance: 3.0\n")
    assert main(["run", str(cheap), "--device", "cpu", "--results", str(tmp_path)]) == 0
    study = optuna.load_study(study_name="tiny_bitwise:grid:cpu",
                              storage=f"sqlite:///{tmp_path / 'tiny_bitwise' / 'optuna.db'}")
    trained = {records.from_trial(t).accuracy_group for t in study.get_trials()
               if records.from_trial(t).accuracy_trained}
    assert len(probes) == 2  # both candidate groups were checked, and both differed
    assert trained == {"baseline", "amp(dtype=bf16)", "torchscript", "amp(dtype=bf16) + torchscript"}


def test_a_throughput_only_study_is_not_probed():
    """It trains no accuracy, so no group has one to share: a probe's three trainings a group would buy nothing."""
    from types import SimpleNamespace

    from ablate.config.design import ProtocolSettings
    from ablate.run import bitwise

    study = SimpleNamespace(budget=SimpleNamespace(throughput_only=True))
    why = bitwise.cannot_pay(study, ProtocolSettings())  # type: ignore[arg-type]
    assert why is not None and "throughput only" in why

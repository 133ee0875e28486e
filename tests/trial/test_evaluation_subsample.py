"""Evaluation sized to the decision: one fixed random test subsample per run, shared by every trial, sized so a
paired accuracy difference's sampling error is a quarter of the tolerance; `full` evaluates the whole split."""
from __future__ import annotations

import dataclasses
import importlib
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from fake_time import FakeTime
from messages import one_message

from ablate.cli import main
from ablate.config import study as studies
from ablate.config.study import Budget
from ablate.render import answer
from ablate.trial import measure
from ablate.trial import metrics as metric
from ablate.trial.measure import StepClock
from ablate.trial.process import TrialSpec, run
from ablate.workload import evaluation
from ablate.workload.tasks import Quality

STUDY = """\
model: mnist_cnn
dataset: mnist
space: {{pin_memory: [off, pin_memory]}}
budget: {{train_samples: 64, warmup_samples: 32, window_samples: 32, windows: 1, profile_steps: 0,
          train_subset: 128, test_subset: 2000, test_batch_size: 500{extra}}}
accuracy_tolerance: 10.0
"""


def _study(tmp_path: Path, extra: str = "", text: str = STUDY) -> studies.Study:
    path = tmp_path / "eval.yaml"
    path.write_text(text.format(extra=extra))
    return studies.load(str(path), "cpu")


# The rule, its cap, the setting.

@pytest.mark.parametrize("tolerance, predictions", [(0.5, 1), (1.0, 1), (1.0, 63), (2.0, 255), (5.0, 63)])
def test_the_size_brings_the_paired_error_to_a_quarter_of_the_tolerance_and_no_further(tolerance, predictions):
    n = evaluation.sample_size(None, 10**9, tolerance, predictions, has_accuracy=True)
    assert evaluation.sampling_error(n, predictions) <= tolerance / 4 < evaluation.sampling_error(n - 1, predictions)
    # The stated rule in closed form: d / (tolerance / 4)^2 independent predictions, a window's worth k / deff.
    deff = 1 + (predictions - 1) * evaluation.WITHIN_WINDOW
    assert n == math.ceil(evaluation.DISAGREEMENT / (tolerance / 400) ** 2 * deff / predictions)


def test_the_size_is_capped_at_the_split_and_a_setting_overrides_the_rule():
    assert evaluation.sample_size(None, 10_000, 0.5, 1, has_accuracy=True) == 10_000  # 320,000 needed
    assert evaluation.sample_size(None, 10_000, 0.0, 1, has_accuracy=True) == 10_000  # no tolerance: all of it
    assert evaluation.sample_size("full", 6_881, 5.0, 63, has_accuracy=True) == 6_881
    assert evaluation.sample_size(500, 6_881, 5.0, 63, has_accuracy=True) == 500
    assert evaluation.sample_size(50_000, 6_881, 5.0, 63, has_accuracy=True) == 6_881
    assert evaluation.sample_size(None, 6_881, 5.0, 63, has_accuracy=False) == 6_881  # a loss: nothing to size by


def test_the_subsample_is_one_draw_per_seed_and_another_seed_draws_another():
    drawn = evaluation.indices(10_000, 800, seed=7)
    assert list(drawn) == list(evaluation.indices(10_000, 800, seed=7))
    assert len(set(drawn)) == 800 and list(drawn) == sorted(drawn) and 0 <= drawn[0] and drawn[-1] < 10_000
    assert len(set(drawn) & set(evaluation.indices(10_000, 800, seed=8))) < 200  # about 64 shared by chance
    assert list(evaluation.indices(300, 800, seed=7)) == list(range(300))


def test_the_setting_is_read_from_the_budget_and_full_or_a_number_only(tmp_path):
    assert _study(tmp_path).budget.eval_samples is None
    assert _study(tmp_path, ", eval_samples: full").budget.eval_samples == "full"
    assert _study(tmp_path, ", eval_samples: 300").budget.eval_samples == 300


@pytest.mark.parametrize("value, expected", [
    ("all", "budget.eval_samples: a number of test samples, or full (the whole split); got 'all'"),
    ("0", "budget.eval_samples: must be > 0"),
    ("2.5", "budget.eval_samples: expected int or str or null"),
])
def test_a_bad_evaluation_setting_is_one_line_and_exit_status_2(tmp_path, capsys, value, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(STUDY.format(extra=f", eval_samples: {value}"))
    assert main(["run", str(path), "--device", "cpu", "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert expected in one_message(err) and "Traceback" not in err
    assert not (tmp_path / "results").exists()


# Through a trial: what it evaluates, and what it records.

@pytest.fixture
def evaluated(monkeypatch):
    """The test samples each evaluation of the trials run in this process read, and the subsample's indices."""
    seen: dict[str, list] = {"counts": [], "indices": [], "batch_sizes": []}
    loop = importlib.import_module("ablate.trial.loop")  # where the trial process finds `evaluate`
    real_evaluate, real_subsample = loop.evaluate, evaluation.subsample

    def counting(task, model, loader, device, *args):
        seen["counts"].append(sum(task.samples(batch) for batch in loader))
        seen["batch_sizes"].append(loader.batch_size)
        return real_evaluate(task, model, loader, device, *args)

    def recording(dataset, tested, seed):
        chosen = real_subsample(dataset, tested, seed)
        seen["indices"].append(list(getattr(chosen, "indices", range(len(chosen)))))
        return chosen

    monkeypatch.setattr(loop, "evaluate", counting)
    monkeypatch.setattr(evaluation, "subsample", recording)
    return seen


def _trial(study: studies.Study, training_seed: int, evaluation_seed: int | None) -> dict:
    study = dataclasses.replace(study, budget=dataclasses.replace(study.budget, seed=training_seed))
    return run(TrialSpec(study, tuple(o[0] for _, o in study.space), "cpu", train_for_accuracy=True,
                         evaluation_seed=evaluation_seed))


def test_every_trial_of_a_run_evaluates_the_same_subsample_whatever_its_training_seed(tmp_path, evaluated, mnist):
    study = _study(tmp_path)
    n = evaluation.sample_size(None, 2000, 10.0, 1, has_accuracy=True)
    assert 0 < n < 2000  # the rule, not the cap, sizes it at this tolerance
    first, parity_seed = _trial(study, 11, evaluation_seed=5), _trial(study, 12, evaluation_seed=5)
    assert evaluated["indices"][0] == evaluated["indices"][1] and len(evaluated["indices"][0]) == n
    assert evaluated["counts"] == [n, n]  # each trial evaluates once, at train_samples, on the n samples
    for m in (first, parity_seed):
        assert m[metric.TEST_SAMPLES] == n and m[metric.TEST_SPLIT_SAMPLES] == 2000
        assert m[metric.TEST_SAMPLING_ERROR] == pytest.approx(evaluation.sampling_error(n, 1))
        assert m[metric.TEST_SAMPLING_ERROR] <= 10.0 / 4


def test_a_trial_too_busy_to_keep_trains_and_evaluates_nothing_past_its_windows(tmp_path, evaluated, mnist,
                                                                                monkeypatch):
    """A trial told a busy limit its windows exceeded returns at once, marked cut short: the study measures it
    again, and neither its training for accuracy nor its evaluation would be kept (`StepClock.cut_short`)."""
    monkeypatch.setattr(measure.foreign_load, "between",
                        lambda before, after: measure.foreign_load.Load(foreign_cores=1.0, steal_cores=0.0))
    study = _study(tmp_path)
    # No window floor: the window closes at its samples, well before train_samples, on any machine.
    study = dataclasses.replace(study, budget=dataclasses.replace(study.budget, train_samples=512,
                                                                  min_window_seconds=0.0))
    spec = TrialSpec(study, tuple(o[0] for _, o in study.space), "cpu", train_for_accuracy=True)
    cut = run(dataclasses.replace(spec, busy_limit=0.25))
    assert cut[metric.CUT_SHORT] == 1.0 and cut[metric.FOREIGN_CORES] == 1.0 and metric.TEST_ACCURACY not in cut
    assert cut[metric.TRAIN_SAMPLES] < 512 and evaluated["counts"] == []  # the warm-up and the window only
    kept = run(spec)  # the last attempt, told no limit, is kept whatever its load
    assert metric.CUT_SHORT not in kept and metric.TEST_ACCURACY in kept and len(evaluated["counts"]) == 1


def test_a_cpu_evaluates_at_the_baselines_batch_unless_the_study_sets_one(tmp_path, evaluated, mnist):
    """On a CPU a forward of a thousand images maps its activations afresh each time (`Budget.test_batch`): unset,
    evaluation takes the baseline's training batch there, and an accelerator keeps a thousand."""
    unset = STUDY.replace(", test_batch_size: 500", "") + "baseline: {{batch_size: 16}}\n"
    _trial(_study(tmp_path, text=unset), 11, evaluation_seed=5)
    _trial(_study(tmp_path), 11, evaluation_seed=5)
    assert evaluated["batch_sizes"] == [16, 500]
    assert Budget().test_batch("cuda", 16) == 1000 and Budget(test_batch_size=200).test_batch("cuda", 16) == 200


def test_full_evaluates_the_whole_split(tmp_path, evaluated, mnist):
    metrics = _trial(_study(tmp_path, ", eval_samples: full"), 11, evaluation_seed=5)
    assert evaluated["counts"] == [2000] and metrics[metric.TEST_SAMPLES] == 2000


KJV = """\
model: hf:gpt2
model_options: {{n_layer: 1, n_head: 1, n_embd: 8}}
dataset: kjv
task: {{causal_lm: {{seq_len: 64}}}}
space: {{set_to_none: [off, set_to_none]}}
baseline: {{batch_size: 16}}
budget: {{train_samples: 32, warmup_samples: 16, window_samples: 16, windows: 1, profile_steps: 0,
          train_subset: 64{extra}}}
accuracy_tolerance: 5.0
"""


@pytest.mark.slow
def test_gpt2_s_50257_word_head_evaluates_the_subsample_not_the_split(tmp_path, evaluated, kjv):
    # The case: the whole split (6,881 windows of 64 tokens) through the head took minutes a training.
    pytest.importorskip("transformers")
    study = _study(tmp_path, text=KJV)
    metrics = _trial(study, 11, evaluation_seed=5)
    split, n = int(metrics[metric.TEST_SPLIT_SAMPLES]), int(metrics[metric.TEST_SAMPLES])
    assert n == evaluation.sample_size(None, split, 5.0, 63, has_accuracy=True) and n < split / 20
    assert evaluated["counts"] == [n]


# What the progress line and the report say.

@pytest.mark.parametrize("train_samples, trains_on", [(64, False), (200, True)])
def test_the_progress_line_counts_what_it_says(monkeypatch, train_samples, trains_on):
    # 64: the windows go on past train_samples (a slow window, or a floor), and must not read "training for
    # accuracy (112 of 64 samples)": it is over there. 200: it goes on after the windows, and says how far it is.
    fake, heard = FakeTime(), []
    monkeypatch.setattr(measure, "time", fake)

    def evaluate() -> Quality:
        fake.now += 10.0
        return Quality(0.5, 90.0)

    budget = Budget(train_samples=train_samples, warmup_samples=8, window_samples=32, windows=3, profile_steps=0)
    clock = StepClock(budget, torch.device("cpu"), True, evaluate=evaluate, test_samples=1_270, on_phase=heard.append)
    for _ in clock.batches([None] * 100):
        fake.now += 1.0
        clock.count(8)
    clock.evaluate_now()  # the trial's last evaluation, after the loop
    assert clock.samples >= train_samples
    assert heard.count(f"evaluating 1,270 test samples (trained on {train_samples})") == 1
    said = [h for h in heard if h.startswith("training for accuracy")]
    assert said == ([f"training for accuracy (112 of {train_samples} samples)"] if trains_on else []), heard


def test_the_report_states_the_evaluation_s_size_and_sampling_error():
    stored = {metric.TEST_SAMPLES: 1270.0, metric.TEST_SPLIT_SAMPLES: 6881.0, metric.TEST_SAMPLING_ERROR: 0.2}
    records = [SimpleNamespace(metrics={}), SimpleNamespace(metrics=stored)]
    for r in records:  # each a measurement's own record: the one field it reads
        r.every_measurement = (r,)
    said = " ".join(answer.evaluated(records))
    assert said.startswith("Accuracy on 1,270 of 6,881 test samples") and "+-0.20 points sampling error" in said
    assert answer.evaluated([]) == []

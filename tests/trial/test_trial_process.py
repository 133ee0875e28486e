"""The fresh trial process: what it reports back, and that it behaves like a user's own script."""
from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.trial.process import TrialFailed, TrialSpec, run_in_fresh_process

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _spec() -> TrialSpec:
    study = studies.load(str(TINY), "cpu")
    return TrialSpec(study, tuple(opts[0] for _, opts in study.space), "cpu", train_for_accuracy=False)


def report_start_method(spec: TrialSpec) -> dict[str, str]:
    return {"start_method": mp.get_start_method()}


def raise_value_error(spec: TrialSpec) -> dict:
    raise ValueError("injected")


def test_dataloader_workers_start_the_way_a_plain_script_starts_them():
    # Inside a forkserver child the default would be "forkserver": about 3 s per
    # DataLoader start that a user's loop never pays.
    plain_default = mp.get_context().get_start_method()
    assert run_in_fresh_process(_spec(), report_start_method)["start_method"] == plain_default


def test_an_exception_in_the_trial_comes_back_with_its_type_and_message():
    with pytest.raises(TrialFailed, match="ValueError: injected"):
        run_in_fresh_process(_spec(), raise_value_error)


class _DeviceSet(Exception):
    pass


def test_a_trial_on_a_cuda_device_makes_it_the_current_device(monkeypatch):
    # Without it, anything that asks for "the" device (pinning threads, capability queries) works on cuda:0.
    from ablate.trial import process

    def set_device(device):
        raise _DeviceSet(str(device))

    monkeypatch.setattr("torch.cuda.set_device", set_device)
    spec = _spec()
    with pytest.raises(_DeviceSet, match="cuda:1"):
        process.run(TrialSpec(spec.study, spec.options, "cuda:1", train_for_accuracy=False))


def _says_what_it_does(spec):
    from ablate.trial import process

    process.phase("loading data")
    process.phase("timed window 1 of 3")
    return {"throughput": 1.0}


def _says_then_dies(spec):
    import os

    from ablate.trial import process

    process.phase("warm-up")
    os._exit(3)


@pytest.mark.slow
def test_the_trial_tells_the_study_what_it_is_doing_and_a_death_after_that_is_still_a_death():
    heard = []
    assert run_in_fresh_process(_spec(), _says_what_it_does, on_phase=heard.append)["throughput"] == 1.0
    assert heard == ["starting (a new interpreter imports torch)", "loading data", "timed window 1 of 3"]
    with pytest.raises(TrialFailed, match="crashed: the trial process exited with status 3"):
        run_in_fresh_process(_spec(), _says_then_dies)


def test_outside_a_trial_process_nothing_listens():
    from ablate.trial import process

    process.phase("loading data")  # no study to tell: nothing happens
    assert process._channel.measuring() == 0.0  # no interpreters to stop: no wait
    process._channel.quiet()


@pytest.mark.usefixtures("mnist")  # the tiny study trains on MNIST: skipped, saying why, where it is missing
def test_a_throughput_only_study_times_its_windows_and_trains_no_accuracy():
    # benchmarks/gpu/transformers.yaml says "throughput only"; it used to train past its windows and evaluate.
    import dataclasses

    from ablate.trial import metrics as metric
    from ablate.trial import process

    spec = _spec()
    budget = dataclasses.replace(spec.study.budget, throughput_only=True)
    study = dataclasses.replace(spec.study, budget=budget)
    metrics = process.run(TrialSpec(study, spec.options, "cpu", train_for_accuracy=True))
    assert metric.TEST_ACCURACY not in metrics and metric.EVALUATIONS not in metrics
    assert metrics[metric.ACCURACY_NOT_MEASURED] == process.THROUGHPUT_ONLY
    windows_end = budget.warmup_samples + budget.windows * budget.window_samples + study.baseline.batch_size
    assert metrics[metric.TRAIN_SAMPLES] <= windows_end < budget.train_samples  # stopped with its windows

"""The pair of benchmark studies that show the step-phase diagnosis on a CPU (benchmarks/studies/slow_data.yaml and
compute_bound.yaml): both load and validate, and only the loader-bound one slows its training samples - in the
trial's training loader, not in its evaluation."""
from __future__ import annotations

from pathlib import Path

import pytest

from ablate.config.study import StudyError, load
from ablate.trial.process import TrialSpec, set_up
from ablate.workload import data
from ablate.workload.slow import SAMPLE_DELAY, SlowSamples

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "studies"


def _baseline(study):
    return TrialSpec(study, tuple(opts[0] for _, opts in study.space), "cpu", train_for_accuracy=False)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("name", ["slow_data", "compute_bound"])
def test_both_load_as_throughput_only_studies_of_workers(name, device):
    study = load(str(BENCH / f"{name}.yaml"), device)
    assert study.budget.throughput_only and study.protocol.full_blocks
    assert {o.label for _, opts in study.space for o in opts} == {"off", "num_workers(n=2)", "set_to_none"}
    assert (SAMPLE_DELAY in study.dataset_kwargs) == (name == "slow_data")


def test_the_slow_study_slows_the_training_loader_only(mnist):
    study = load(str(BENCH / "slow_data.yaml"), "cpu")
    assert study.dataset_kwargs[SAMPLE_DELAY] > 0
    built = set_up(_baseline(study))
    assert isinstance(built.loader.dataset, SlowSamples)
    assert built.loader.dataset.delay_ms == study.dataset_kwargs[SAMPLE_DELAY]
    assert not isinstance(built.splits.test, SlowSamples)  # what evaluation reads (ablate.trial.process.run)


def test_the_compute_bound_study_slows_nothing():
    study = load(str(BENCH / "compute_bound.yaml"), "cpu")
    try:
        data.load(study.dataset, 1, 1, **study.dataset_kwargs)
    except data.DataUnavailable as error:
        pytest.skip(f"the King James Bible is not available: {error}")
    built = set_up(_baseline(study))
    assert not isinstance(built.loader.dataset, SlowSamples)


@pytest.mark.parametrize("value", [-1, "2ms", True, ".inf"])
def test_a_wait_that_is_no_number_of_milliseconds_is_one_line(value, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"model: mnist_cnn\ndataset: mnist\ndataset_options: {{sample_delay_ms: {value}}}\n"
                    "space: {a: [off]}\n")
    with pytest.raises(StudyError, match=r"dataset_options\.sample_delay_ms: expected a number of milliseconds >= 0"):
        load(str(path), "cpu")


def test_every_dataset_takes_the_wait_beside_its_own_options(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("model: resnet18_cifar\ndataset: synthetic\n"
                    "dataset_options: {image_size: 32, sample_delay_ms: 0.5}\nspace: {a: [off]}\n")
    assert load(str(path), "cpu").dataset_kwargs == {"image_size": 32, SAMPLE_DELAY: 0.5}
    path.write_text("model: mnist_cnn\ndataset: mnist\ndataset_options: {sample_delay: 2}\nspace: {a: [off]}\n")
    with pytest.raises(StudyError, match="takes no options of its own.*did you mean 'sample_delay_ms'"):
        load(str(path), "cpu")

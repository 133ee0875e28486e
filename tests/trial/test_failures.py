"""A trial that fails says why, in one line that starts with its kind, and takes nothing else down."""
from __future__ import annotations

import dataclasses
import multiprocessing as mp
from pathlib import Path

import pytest

from ablate.config import study as studies
from ablate.config.choices import Option
from ablate.trial import failures
from ablate.trial.process import TrialFailed, TrialSpec, run_in_fresh_process

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"


def _spec(model: str = "mnist_cnn", dataset: str = "mnist", options: tuple[Option, ...] = (), **budget) -> TrialSpec:
    """tiny.yaml's trial of `model` on `dataset`, its budget changed by `budget`; no profiling window (no phase is
    read here: a trial that gets past its windows pays seconds for it on mnist_cnn)."""
    study = studies.load(str(TINY), "cpu")
    budget = {"profile_steps": 0, **budget}
    study = dataclasses.replace(study, model=model, dataset=dataset, budget=dataclasses.replace(study.budget, **budget))
    return TrialSpec(study, options, "cpu", train_for_accuracy=True)


def _failure(spec: TrialSpec) -> str:
    with pytest.raises(TrialFailed) as failed:
        run_in_fresh_process(spec)
    assert not [p for p in mp.active_children() if p.name == "ablate-trial"]  # nothing left running
    return str(failed.value)


@pytest.mark.slow
@pytest.mark.parametrize("model, expected", [
    ("faulty:Raises", "error: ValueError: injected failure in forward"),
    ("faulty:Diverges", "diverged: the training loss became NaN or infinite by step 1"),
    ("faulty:RunsOutOfMemory", "oom: OutOfMemoryError: CUDA out of memory"),
    ("faulty:KillsItself", "killed: the trial process was killed by SIGKILL"),
])
def test_a_failing_trial_is_reported_with_its_kind(mnist, model, expected):
    assert _failure(_spec(model)).startswith(expected)


@pytest.mark.slow
def test_after_running_out_of_memory_the_next_trial_runs(mnist):
    assert _failure(_spec("faulty:RunsOutOfMemory")).startswith("oom:")
    metrics = run_in_fresh_process(_spec())  # the failed trial's process, and its memory, are gone
    assert metrics["test_accuracy"] > 0


def test_a_hung_trial_is_killed_at_the_study_time_limit(mnist):
    reason = _failure(_spec("faulty:Hangs", trial_timeout_s=3.0))
    assert reason.startswith("timeout: the trial ran past the study's limit of 3 s")


def test_a_compilation_failure_is_a_compile_failure_not_an_eager_run(mnist):
    reason = _failure(_spec("faulty:NotScriptable", options=(Option("torchscript"),)))
    assert reason.startswith("compile: ")


def test_a_dataloader_worker_that_dies_fails_the_trial(mnist):
    reason = _failure(_spec(dataset="faulty:dying_workers", options=(Option("num_workers", (("n", 1),)),)))
    assert reason.startswith("worker: ") and "exited unexpectedly" in reason


@pytest.mark.slow
def test_a_dataloader_worker_that_hangs_fails_the_trial_within_its_timeout(mnist):
    reason = _failure(_spec(dataset="faulty:hanging_workers", options=(Option("num_workers", (("n", 1),)),),
                            loader_timeout_s=2.0))
    assert reason.startswith("worker: ") and "timed out after 2.0 seconds" in reason


@pytest.mark.gpu
def test_a_real_cuda_out_of_memory_is_an_oom_failure(mnist):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    study_spec = _spec("faulty:AllocatesATerabyte")
    spec = dataclasses.replace(study_spec, device="cuda")
    assert _failure(spec).startswith("oom: OutOfMemoryError")
    assert run_in_fresh_process(dataclasses.replace(_spec(), device="cuda"))["test_accuracy"] > 0


def test_compile_refuses_to_run_where_a_failure_would_silently_fall_back_to_eager():
    import torch

    from strategies import Compile

    with torch._dynamo.config.patch(suppress_errors=True), pytest.raises(RuntimeError, match="suppress_errors"):
        Compile().prepare_model(torch.nn.Linear(2, 2))
    assert torch._dynamo.config.suppress_errors is False  # restored for the tests that follow


def test_a_cuda_graph_fallback_is_a_compile_failure():
    # Inductor's cudagraph_or_error raises a RuntimeError with its log line; it must not pass as a plain error.
    error = RuntimeError("skipping cudagraphs due to mutated inputs (1 instances)")
    assert failures.describe(error).startswith("compile: ")


@pytest.mark.slow
def test_a_parity_seed_that_fails_ends_the_parity_race_instead_of_queueing_it_forever(mnist, tmp_path, monkeypatch):
    import optuna
    from tiny_mnist import tiny_study

    from ablate.cli import main
    from ablate.run import objective

    seeds: list[int] = []
    real = objective.run_in_fresh_process

    def fails_at_a_second_seed(spec, **kwargs):
        seeds.append(spec.study.budget.seed)
        if spec.study.budget.seed != seeds[0]:  # a parity run: another training seed than the run's own
            raise TrialFailed("crashed: injected at a parity seed")
        return real(spec, **kwargs)

    monkeypatch.setattr(objective, "run_in_fresh_process", fails_at_a_second_seed)
    # tiny.yaml on a small CNN (tests/support/tiny_mnist.py): the same study, its trials in a fraction of the time.
    study = tiny_study(tmp_path / "study")
    assert main(["run", str(study), "--device", "cpu", "--results", str(tmp_path)]) == 0
    trials = optuna.load_study(study_name="tiny:grid:cpu", storage=f"sqlite:///{tmp_path / 'tiny' / 'optuna.db'}"
                               ).get_trials()
    # The run's own seed trains in parity measurements too (after screening): those complete.
    parity = [t for t in trials if t.user_attrs.get("phase") == "parity" and t.user_attrs.get("seed_index")]
    if len(set(seeds)) == 1:  # the race's leader trains as the baseline does: nothing to judge, no second seed asked
        assert not parity
        return
    assert parity and all(t.user_attrs["state"] in ("failed", "duplicate") for t in parity)
    assert sum(t.user_attrs["state"] == "duplicate" for t in parity) <= len(parity) // 2  # no endless re-queueing

"""Shared fixtures: the tiny CNN and data set of tests/support/tiny_cnn.py, and a hermetic session."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import TensorDataset

# The helpers in tests/support/ import by their own names (`from fake_cuda import FakeCUDA`), and study files name
# them (`model: faulty:Raises`): trial interpreters inherit this path.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from tiny_cnn import TinyCNN, make_dataset, make_model


@pytest.fixture(autouse=True)
def _inductor_cudagraph_or_error_restored():
    """CUDAGraphs sets Inductor's process-wide `cudagraph_or_error` (a trial has its process to itself); tests share
    one process, so each test gets the value back as it was, and a later compile test is not made to error."""
    def flag() -> bool | None:
        config = sys.modules.get("torch._inductor.config")
        return getattr(config.triton, "cudagraph_or_error", None) if config is not None else None

    before = flag()
    yield
    if flag() is not None:
        sys.modules["torch._inductor.config"].triton.cudagraph_or_error = bool(before)


@pytest.fixture(autouse=True, scope="session")
def _sigint_raises_keyboard_interrupt():
    """Ctrl-C as Python sets it up, even when the suite was started with SIGINT ignored (a shell's background job).

    Python leaves SIGINT ignored when it starts with it ignored, and an ignored
    signal stays ignored across fork and exec, so the tests of interrupts (in
    this process and in the `ablate` processes they start) would never see it.
    A Python handler, unlike SIG_IGN, is reset to the default by exec, so
    every subprocess starts with Python's usual Ctrl-C as well.
    """
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if previous is signal.SIG_IGN:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True, scope="session")
def _no_user_mlflow_settings():
    """Tests neither read nor write the user's MLflow store: every MLFLOW_* variable of the shell is unset.

    For the whole session, servers started by fixtures and subprocesses included; a test that needs one
    sets it itself.
    """
    import ablate.tracking.tracker  # noqa: F401 - sets ablate's own MLFLOW_ default at import: cleared here too, whichever test imports it first

    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("MLFLOW_")]:
            patch.delenv(name)
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_terminal_width_of_the_users():
    """The output is checked as a pipe gets it: the shell's COLUMNS (ablate wraps its lines to it) is unset."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COLUMNS", raising=False)
        yield


@pytest.fixture(autouse=True, scope="session")
def _data_cache_of_its_own(tmp_path_factory):
    """Decoded datasets cached in a folder of the session's (trial subprocesses inherit it), not the data root's."""
    from ablate.workload.datacache import CACHE_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("data-cache")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _results_folder_of_its_own(tmp_path_factory):
    """A command a test runs without --results writes to the default results folder, and what libraries said to its
    log: a folder of the session's (trial subprocesses and `ablate` processes inherit it), not the checkout's
    results/ beside the user's studies. `ablate.cli` reads the variable once, at import."""
    import ablate.cli

    folder = tmp_path_factory.mktemp("default-results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ABLATE_RESULTS_DIR", str(folder))
        patch.setattr(ablate.cli, "RESULTS_DIR", folder)
        yield


def _skip_without(dataset: str, what: str, **options: object) -> None:
    """Skips the test, saying why, where `dataset` is neither on disk nor downloadable."""
    from ablate.workload import data

    try:
        data.load(dataset, **options)
    except data.DataUnavailable as error:
        pytest.skip(f"{what} not available: {error}")


@pytest.fixture(scope="session")
def mnist() -> None:
    _skip_without("mnist", "MNIST")


@pytest.fixture(scope="session")
def kjv() -> None:
    _skip_without("kjv", "the KJV corpus", seq_len=64)


@pytest.fixture(scope="session")
def tiny_study_file(tmp_path_factory) -> Path:
    """tests/studies/tiny.yaml on a small CNN (tests/support/tiny_mnist.py): the same study, named tiny, for a
    fraction of mnist_cnn's time a trial. Run it again, or report on it, by this file: the stored hash is its own.
    With its profiling window (`profiled`): the session's run stores and says where a step's time goes."""
    from tiny_mnist import tiny_study

    return tiny_study(tmp_path_factory.mktemp("tiny-study"), profiled=True)


@pytest.fixture(scope="session")
def tiny_study_run(tmp_path_factory, tiny_study_file, mnist) -> tuple[Path, str]:
    """`tiny_study_file` run once for the session into a --results folder of its own: the folder and what the run
    printed, stdout and stderr together as a log gets them (`ablate run ... > run.log 2>&1`).

    For the modules that only read what a complete run leaves (tests/end_to_end/test_end_to_end.py,
    tests/tracking/test_mlflow_view.py), which each ran the study before: minutes on 2 cores.
    """
    import contextlib
    import io

    from ablate.cli import main

    results = tmp_path_factory.mktemp("tiny-run")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["run", str(tiny_study_file), "--device", "cpu", "--results", str(results)])
    assert code == 0, out.getvalue()
    return results, out.getvalue()


@pytest.fixture
def model_factory():
    """Call it to get a fresh TinyCNN with the same initial weights every time."""
    return make_model


@pytest.fixture
def model() -> TinyCNN:
    return make_model()


@pytest.fixture(scope="session")
def dataset() -> TensorDataset:
    return make_dataset()


@pytest.fixture
def batch(dataset):
    """One (inputs, targets) batch of 16 samples."""
    return dataset.tensors[0][:16], dataset.tensors[1][:16]


def needs_cuda():
    """`pytest.mark.skipif` for tests that need a CUDA device."""
    return pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


# Expected on a CPU-only machine / with current PyTorch, and not what these tests are about.
EXPECTED_WARNINGS = (
    "ignore:.*pin_memory.*no accelerator:UserWarning",
    "ignore:.*torch.jit.script.* is deprecated:FutureWarning",
)


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        for spec in EXPECTED_WARNINGS:
            item.add_marker(pytest.mark.filterwarnings(spec))
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip)

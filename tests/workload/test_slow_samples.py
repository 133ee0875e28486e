"""`dataset_options: {sample_delay_ms: N}`: each training sample waits N ms, in the dataset, in whichever process
loads it; the test split is never slowed, and nothing is slowed unless a study asks."""
from __future__ import annotations

import pickle
import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from ablate.workload import data
from ablate.workload.slow import SAMPLE_DELAY, SlowSamples


@pytest.fixture
def pair(monkeypatch, tmp_path):
    """A registered dataset of two small tensor splits, recording the options it was called with."""
    calls: list[dict] = []

    def pair(root, **options):
        calls.append(options)
        return data.Splits(TensorDataset(torch.arange(12.0)), TensorDataset(torch.arange(4.0)))

    monkeypatch.setitem(data.DATASETS, "pair", pair)
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))
    return calls


def test_nothing_is_slowed_by_default(pair):
    splits = data.load("pair")
    assert not isinstance(splits.train, SlowSamples) and not isinstance(splits.test, SlowSamples)
    zero = data.load("pair", **{SAMPLE_DELAY: 0})  # 0 is the default, said aloud
    assert not isinstance(zero.train, SlowSamples)


def test_only_the_training_split_is_slowed_and_the_dataset_never_sees_the_option(pair):
    splits = data.load("pair", 8, None, **{SAMPLE_DELAY: 2})
    assert isinstance(splits.train, SlowSamples) and splits.train.delay_ms == 2.0
    assert not isinstance(splits.test, SlowSamples)
    assert len(splits.train) == 8 and splits.train[3] == (torch.tensor(3.0),)  # the same samples, cut first
    assert pair == [{}]  # the dataset's own function got none of it


def test_what_a_load_found_is_found_again_whatever_the_wait(pair):
    data.load("pair", **{SAMPLE_DELAY: 2})
    assert data.throughput_only("pair") is None and len(pair) == 1  # the same data: not loaded again


def test_each_sample_waits_in_the_process_that_loads_it(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    slow = SlowSamples(TensorDataset(torch.arange(5.0)), 3)
    assert [slow[i][0].item() for i in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert slept == [0.003] * 5


def test_the_wait_survives_pickling_into_a_spawned_worker():
    """A spawned worker gets the dataset pickled (a forked one inherits it): the wait must come along. Timed from
    the second epoch of persistent workers, so the worker's start-up is not in it: a lower bound only (the one
    worker sleeps through every sample in turn), which a loaded machine can only make longer."""
    samples, delay_ms = 32, 2.0
    slow = SlowSamples(TensorDataset(torch.arange(float(samples))), delay_ms)
    again = pickle.loads(pickle.dumps(slow))
    assert isinstance(again, SlowSamples) and again.delay_ms == delay_ms and len(again) == samples
    loader = DataLoader(slow, batch_size=4, num_workers=1, persistent_workers=True,
                        multiprocessing_context="spawn")
    assert sum(len(b[0]) for b in loader) == samples  # the first epoch starts the worker
    began = time.perf_counter()
    seen = torch.cat([b[0] for b in loader])
    elapsed = time.perf_counter() - began
    assert sorted(seen.tolist()) == list(range(samples))
    assert elapsed >= samples * delay_ms / 1000

"""The study models and datasets: ResNet-18 for 32x32 images, CIFAR-10 or its FakeData stand-in."""
from __future__ import annotations

import torch

from ablate.workload import data
from ablate.workload.models import MODELS


def test_resnet18_cifar_keeps_full_resolution_in_the_first_stage():
    model = MODELS["resnet18_cifar"]()
    assert model.conv1.stride == (1, 1) and model.conv1.kernel_size == (3, 3)
    assert isinstance(model.maxpool, torch.nn.Identity)
    stem = model.relu(model.bn1(model.conv1(torch.randn(2, 3, 32, 32))))
    assert model.layer1(model.maxpool(stem)).shape == (2, 64, 32, 32)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_cifar10_without_files_offline_is_fakedata_for_throughput_only(tmp_path, monkeypatch):
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))
    # No network in the test: make the download fail the way an offline machine does.
    monkeypatch.setattr("torchvision.datasets.CIFAR10.download", lambda self: (_ for _ in ()).throw(OSError("offline")))
    splits = data.load("cifar10", train_subset=8, test_subset=4)
    note = splits.throughput_only
    assert note and "accuracy not measured" in note and "FakeData" in note
    assert str(tmp_path / "cifar-10-batches-py") in note and "offline" in note and "\n" not in note
    image, label = splits.train[0]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32 and 0 <= label < 10
    assert (len(splits.train), len(splits.test)) == (8, 4)
    assert not torch.equal(splits.train[0][0], splits.test[0][0])  # disjoint random images


def test_mnist_is_real_data():
    import pytest

    try:
        splits = data.load("mnist", train_subset=4, test_subset=4)
    except data.DataUnavailable as error:
        pytest.skip(f"MNIST not available: {error}")
    assert splits.throughput_only is None


def test_whether_data_has_accuracy_is_answered_by_the_load_the_process_made(tmp_path, monkeypatch):
    """A study's process loads its dataset once, to fail early; asked again whether it has accuracy (the runner,
    before its bitwise probes), it answers from that load instead of loading a large dataset a second time."""
    loads: list[dict] = []

    def counted(root, **options):
        loads.append(options)
        return data.Splits([0] * 4, [0], throughput_only="a stand-in" if options.get("fake") else None)

    monkeypatch.setitem(data.DATASETS, "counted", counted)
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))
    data.load("counted", fake=True)
    assert data.throughput_only("counted", fake=True) == "a stand-in" and len(loads) == 1  # no second load
    assert data.throughput_only("counted", fake=False) is None and len(loads) == 2  # other options: loaded
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "elsewhere"))
    assert data.throughput_only("counted", fake=True) == "a stand-in" and len(loads) == 3  # another root: loaded

"""Decoded once, memory-mapped after: the cache gives the same tensors, follows its sources, and fails soft."""
from __future__ import annotations

import os
import subprocess
import sys

import torch

from ablate.workload import datacache


def _build(calls: list) -> callable:
    def build() -> dict[str, torch.Tensor]:
        calls.append(1)
        return {"x": torch.arange(10, dtype=torch.uint8)}
    return build


def test_built_once_then_loaded_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv(datacache.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "data.bin"
    source.write_bytes(b"abc")
    calls: list = []
    first = datacache.cached("k", [source], _build(calls), tmp_path)
    second = datacache.cached("k", [source], _build(calls), tmp_path)
    assert len(calls) == 1 and torch.equal(first["x"], second["x"])
    assert len(list((tmp_path / "cache").glob("k-*.pt"))) == 1


def test_a_changed_source_is_a_new_entry_never_a_stale_one(tmp_path, monkeypatch):
    monkeypatch.setenv(datacache.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "data.bin"
    source.write_bytes(b"abc")
    calls: list = []
    datacache.cached("k", [source], _build(calls), tmp_path)
    source.write_bytes(b"abcd")  # another size (and time)
    datacache.cached("k", [source], _build(calls), tmp_path)
    assert len(calls) == 2


def test_an_unwritable_cache_folder_builds_every_time(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(datacache.CACHE_ENV, str(blocker / "cache"))  # under a file: mkdir fails, as read-only would
    calls: list = []
    assert datacache.cached("k", [blocker], _build(calls), tmp_path)["x"].tolist() == list(range(10))
    datacache.cached("k", [blocker], _build(calls), tmp_path)
    assert len(calls) == 2


def test_a_killed_writers_temporary_file_is_removed_and_a_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(datacache.CACHE_ENV, str(tmp_path))
    source = tmp_path / "data.bin"
    source.write_bytes(b"abc")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    calls: list = []
    datacache.cached("k", [source], _build(calls), tmp_path)
    entry = next(tmp_path.glob("k-*.pt"))
    entry.unlink()
    left, live = (tmp_path / f"{entry.name}.{int(dead.stdout)}.tmp", tmp_path / f"{entry.name}.{os.getppid()}.tmp")
    left.write_bytes(b"half")
    live.write_bytes(b"half")
    datacache.cached("k", [source], _build(calls), tmp_path)
    assert not left.exists() and live.exists() and entry.is_file()


def test_mnist_through_the_cache_is_torchvisions_mnist(mnist):
    from torchvision import datasets

    from ablate.workload import data

    cached = data.load("mnist")
    plain = datasets.MNIST(data.data_root(), train=False, download=False)
    assert torch.equal(cached.train.data, datasets.MNIST(data.data_root(), train=True, download=False).data)
    assert torch.equal(data.load("mnist").train[7][0], cached.train[7][0])  # the second load, from the file
    assert list(datacache.cache_dir(data.data_root()).glob("mnist-t10k-*.pt"))
    # The test split, decoded once: every sample as the training split's transform makes it, bitwise.
    assert len(cached.test) == len(plain) and torch.equal(cached.test.tensors[1], plain.targets)
    for i in (0, 1234, len(plain) - 1):
        assert torch.equal(cached.test[i][0], cached.train.transform(plain[i][0]))
    assert torch.equal(data.load("mnist").test.tensors[0], cached.test.tensors[0])  # read back from its file

"""Datasets a study can name, and where their files are found.

The data root is ``$ABLATE_DATA_DIR`` when set, else ``./data``. Missing files
are downloaded (torchvision's downloads for images, Project Gutenberg for the
King James Bible), each connection and read limited to DOWNLOAD_TIMEOUT_S so a
network that drops packets cannot hang a trial; ``ABLATE_OFFLINE=1`` skips the
attempt. When the files cannot be had (offline), the error says which files
were looked for, where, and how to point ABLATE_DATA_DIR at a copy.

Text datasets are bytes cut into windows of the next-token task's
``seq_len``: sample i is bytes [i*seq_len, (i+1)*seq_len) and its targets the
same window shifted by one byte. The last 10% of the file (by position, so no
verse is both trained on and held out) is the test split. With a
``tokenizer`` (a local folder or hub id, for a Hugging Face model that has
one) the windows are of its token ids instead, and the splits' ``note`` says so.

Images for library models: ``imagefolder`` reads torchvision's ImageFolder
layout (``train/`` and ``val/`` under ``path``, one folder per class) at the
model's input size; ``synthetic`` is random tensors of that size with random
labels, throughput only, like the CIFAR-10 stand-in.

Every dataset also takes ``sample_delay_ms``: each training sample returned that
many milliseconds late (`ablate.workload.slow`, a loader bound by I/O on purpose,
for showing the step-phase diagnosis); the test split is never slowed.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, cast

import torch
from torch.utils.data import Dataset, Subset, TensorDataset

from ablate.workload.datacache import cached
from ablate.workload.registry import lookup
from ablate.workload.slow import SAMPLE_DELAY, SlowSamples

DATA_ENV = "ABLATE_DATA_DIR"
OFFLINE_ENV = "ABLATE_OFFLINE"  # "1": never try a download (a machine with no route out, where one may hang)
DOWNLOAD_TIMEOUT_S = 30  # per connection attempt and per read, not for the whole file


class DataUnavailable(RuntimeError):
    """The dataset's files are neither on disk nor downloadable."""


def data_root() -> Path:
    return Path(os.environ.get(DATA_ENV) or "data")


@dataclass(frozen=True)
class Splits:
    train: Dataset
    test: Dataset
    throughput_only: str | None = None  # why test accuracy means nothing here (synthetic stand-in data)
    note: str | None = None  # how the data reaches the model, where that is a choice (text: tokens or bytes)


def offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "") not in ("", "0")


@contextlib.contextmanager
def _time_limited() -> Iterator[None]:
    """torchvision's downloads open URLs without a timeout; a network that drops packets would hang them for good."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _torchvision(dataset: Callable[..., Dataset], root: Path, transform: Callable) -> Splits:
    """Both splits of a torchvision dataset, downloaded (time-limited) unless they are on disk or we are offline."""
    with _time_limited():
        return Splits(dataset(root, train=True, download=not offline(), transform=transform),
                      dataset(root, train=False, download=not offline(), transform=transform))


def _why(error: Exception) -> str:
    return " ".join(str(error).split())[:200]  # torchvision's messages span lines


def _mnist(root: Path) -> Splits:
    from torchvision import datasets, transforms

    class MNIST(datasets.MNIST):
        """torchvision's MNIST, its idx files parsed once (ablate.workload.datacache); samples still decoded one by
        one."""

        @property
        def prefix(self) -> str:
            return "train" if self.train else "t10k"

        @property
        def raw_files(self) -> list[Path]:
            """The idx files its split is parsed from."""
            kinds = ("images-idx3-ubyte", "labels-idx1-ubyte")
            return [Path(self.raw_folder) / f"{self.prefix}-{kind}" for kind in kinds]

        def _load_data(self) -> tuple[torch.Tensor, torch.Tensor]:
            loaded = cached(f"mnist-{self.prefix}", self.raw_files,
                            lambda: dict(zip(("data", "targets"), datasets.MNIST._load_data(self))), root)
            return loaded["data"], loaded["targets"]

    # The normalisation of the PyTorch MNIST example: the training set's mean and std.
    mean, std = 0.1307, 0.3081
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((mean,), (std,))])
    try:
        splits = _torchvision(MNIST, root, transform)
    except Exception as error:  # torchvision raises RuntimeError or URLError depending on where it fails
        reason = _why(error)
        folder = (root / "MNIST" / "raw").resolve()
        files = ", ".join(name.removesuffix(".gz") for name, _ in datasets.MNIST.resources)
        raise DataUnavailable(
            f"MNIST is not in {folder} (looked for {files}) and could not be downloaded ({reason}); "
            f"set {DATA_ENV} to a folder holding MNIST/raw/ in torchvision's layout"
        ) from error
    test = cast(MNIST, splits.test)
    return Splits(splits.train, decoded(test, f"mnist-{test.prefix}-decoded-{mean}-{std}", test.raw_files, root))


def decoded(dataset: Dataset, key: str, sources: list[Path], root: Path) -> Dataset:
    """`dataset`'s samples as its own `__getitem__` makes them, decoded once into tensors (`cached` by `key`, which
    must name the transform, and its `sources`) and read back as a TensorDataset.

    Why, for a test split: it is only evaluated, never timed, yet each training's evaluation decoded every image
    one by one again (PIL, ToTensor, Normalize) - about a second of a CPU's each time. The training split keeps its
    per-sample decoding: that is the loop the study measures, and what DataLoader workers speed up.
    """
    def build() -> dict[str, torch.Tensor]:
        inputs, targets = zip(*(dataset[i] for i in range(len(dataset))))  # type: ignore[arg-type]
        return {"inputs": torch.stack(inputs), "targets": torch.as_tensor(targets)}

    tensors = cached(key, sources, build, root)
    return TensorDataset(tensors["inputs"], tensors["targets"])


def _cifar10(root: Path) -> Splits:
    """CIFAR-10; without its files and offline, torchvision's FakeData of the same shape, for throughput only."""
    from torchvision import datasets, transforms

    # The training set's per-channel mean and std.
    transform = transforms.Compose([
        transforms.ToTensor(), transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))])
    try:
        return _torchvision(datasets.CIFAR10, root, transform)
    except Exception as error:  # offline, or a partial download
        folder = (root / datasets.CIFAR10.base_folder).resolve()
        note = (f"CIFAR-10 is not in {folder} and could not be downloaded ({_why(error)}); torchvision FakeData "
                f"(random 32x32 images, random labels) stood in: throughput only, accuracy not measured")

    def fake(size: int, offset: int) -> Dataset:
        return datasets.FakeData(size, image_size=(3, 32, 32), num_classes=10, transform=transform,
                                 random_offset=offset)

    # The real splits' sizes, so an epoch is as long; disjoint seeds for train and test.
    return Splits(fake(50_000, 0), fake(10_000, 50_000), throughput_only=note)


HELD_OUT = 0.1  # the last tenth of a text file is the test split
# Project Gutenberg's eBook 10: the same text as the offline copy (kjv/kjv.txt), laid out differently.
KJV_URL = "https://www.gutenberg.org/cache/epub/10/pg10.txt"


class ByteWindows(Dataset):
    """Consecutive windows of `seq_len` bytes (or token ids), each with its targets: the next one at every position."""

    def __init__(self, data: torch.Tensor, seq_len: int) -> None:
        self.data, self.seq_len = data, seq_len

    def __len__(self) -> int:
        return max(0, (len(self.data) - 1) // self.seq_len)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        start = index * self.seq_len
        window = self.data[start:start + self.seq_len + 1].long()
        return window[:-1], window[1:]


def _byte_splits(path: Path, seq_len: int, tokenizer: str | None = None) -> Splits:
    data = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8)
    note = None
    if tokenizer is not None:
        data, note = _tokenize(path, tokenizer), f"{path.name} tokenized by {tokenizer}'s tokenizer"
    cut = int(len(data) * (1 - HELD_OUT))
    train, test = ByteWindows(data[:cut], seq_len), ByteWindows(data[cut:], seq_len)
    if not len(test):
        raise DataUnavailable(f"{path} holds {len(data):,} bytes: too short for one held-out window of "
                              f"{seq_len + 1} tokens in its last {HELD_OUT:.0%}")
    return Splits(train, test, note=note)


def _tokenize(path: Path, tokenizer: str) -> torch.Tensor:
    """The file's token ids under a Hugging Face tokenizer, read from a folder or the local cache (offline first)."""
    from transformers import AutoTokenizer

    try:
        encoder = AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError) as error:
        raise DataUnavailable(f"the tokenizer of {tokenizer} cannot be loaded ({_why(error)}); use hf:ARCH "
                              "(text as bytes) or a folder with tokenizer files") from error
    def encode() -> dict[str, torch.Tensor]:
        ids = encoder(path.read_text(encoding="utf-8", errors="replace"), add_special_tokens=False)["input_ids"]
        return {"ids": torch.tensor(ids, dtype=torch.int64)}

    # Keyed by the tokenizer's name or folder, and the text file.
    return cached(f"tokens-{hashlib.sha256(tokenizer.encode()).hexdigest()[:12]}", [path], encode, data_root())["ids"]


def _text(root: Path, seq_len: int, path: str, tokenizer: str | None = None) -> Splits:
    """Any text file, as bytes; a relative `path` is inside the data root."""
    file = root / Path(path).expanduser()  # an absolute path replaces the root
    if not file.is_file():
        raise DataUnavailable(f"text file {file.resolve()} does not exist (dataset_options.path is absolute or "
                              f"relative to the data root, {DATA_ENV} or ./data)")
    return _byte_splits(file, seq_len, tokenizer)


def _kjv(root: Path, seq_len: int, tokenizer: str | None = None) -> Splits:
    """The King James Bible (4.4 MB of ASCII), downloaded from Project Gutenberg when it is not on disk."""
    file = root / "kjv" / "kjv.txt"
    if not file.is_file():
        try:
            if offline():
                raise OSError(f"{OFFLINE_ENV} is set")
            file.parent.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(KJV_URL, timeout=DOWNLOAD_TIMEOUT_S) as response:
                text = response.read()
            partial = file.with_suffix(".part")  # renamed when whole: an interrupted download leaves no kjv.txt
            partial.write_bytes(text)
            partial.replace(file)
        except Exception as error:  # offline: URLError, a timeout, or an unwritable data root
            raise DataUnavailable(
                f"the King James Bible is not at {file.resolve()} and could not be downloaded from {KJV_URL} "
                f"({_why(error)}); set {DATA_ENV} to a folder holding kjv/kjv.txt") from error
    return _byte_splits(file, seq_len, tokenizer)


IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # what timm and torchvision models expect


def _image_folder(root: Path, path: str, image_size: int = 224) -> Splits:
    """torchvision's ImageFolder: ``path/train`` and ``path/val`` (or ``path/test``), one folder per class."""
    from torchvision import datasets, transforms

    folder = root / Path(path).expanduser()
    test = next((folder / name for name in ("val", "test") if (folder / name).is_dir()), None)
    if not (folder / "train").is_dir() or test is None:
        raise DataUnavailable(f"image folder {folder.resolve()} needs train/ and val/ (or test/) inside, one "
                              "subfolder per class (torchvision's ImageFolder layout)")
    transform = transforms.Compose([transforms.Resize(image_size), transforms.CenterCrop(image_size),
                                    transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    return Splits(datasets.ImageFolder(folder / "train", transform), datasets.ImageFolder(test, transform))


def _synthetic(root: Path, image_size: int = 224, channels: int = 3, num_classes: int = 1000,
               samples: int = 10_000) -> Splits:
    """Random images of the model's input size with random labels (torchvision FakeData): throughput only."""
    from torchvision import datasets, transforms

    def fake(size: int, offset: int) -> Dataset:
        return datasets.FakeData(size, image_size=(channels, image_size, image_size), num_classes=num_classes,
                                 transform=transforms.ToTensor(), random_offset=offset)

    note = (f"synthetic data (random {channels}x{image_size}x{image_size} images, random labels): throughput only, "
            "accuracy not measured")
    return Splits(fake(samples, 0), fake(max(1, samples // 10), samples), throughput_only=note)


DATASETS: dict[str, Callable[..., Splits]] = {
    "mnist": _mnist,
    "cifar10": _cifar10,
    "kjv": _kjv,
    "text": _text,
    "imagefolder": _image_folder,
    "synthetic": _synthetic,
}
TEXT_DATASETS = frozenset({"kjv", "text"})  # windows of bytes for the next_token task: they take its seq_len


# What this process's loads found: (data root, offline, dataset, its options) -> the splits' `throughput_only`.
_FOUND: dict[tuple[str, bool, str, str], str | None] = {}


def load(name: str, train_subset: int | None = None, test_subset: int | None = None, **options: object) -> Splits:
    """The train and test splits of dataset `name`, optionally cut to their first N samples.

    `options` go to the dataset (a text dataset's ``seq_len`` and ``path``), except ``sample_delay_ms``, which
    every dataset takes: each training sample then waits that long (`ablate.workload.slow`; the test split never).
    """
    delay_ms = float(cast(float, options.pop(SAMPLE_DELAY, 0)))  # a number >= 0: ablate.config.datasets checked it
    splits = lookup(DATASETS, name, "dataset")(data_root(), **options)
    _FOUND[_key(name, options)] = splits.throughput_only
    cut = lambda ds, n: Subset(ds, range(min(n, len(ds)))) if n else ds  # noqa: E731
    train = cut(splits.train, train_subset)
    if delay_ms > 0:
        train = SlowSamples(train, delay_ms)
    return Splits(train, cut(splits.test, test_subset), splits.throughput_only, splits.note)


def throughput_only(name: str, **options: object) -> str | None:
    """Why dataset `name` has no accuracy here (synthetic, or a stand-in for missing files), else None: what this
    process's load of it found (a study's process loads it once, to fail early), else loaded now. So a study's
    process asks without loading a large dataset twice (an ImageFolder's scan of every file, CIFAR-10's checksums)."""
    if (key := _key(name, options)) not in _FOUND:
        load(name, None, None, **options)
    return _FOUND[key]


def _key(name: str, options: dict[str, object]) -> tuple[str, bool, str, str]:
    """What a load found depends on the data's options; the training samples' wait does not change it."""
    return str(data_root()), offline(), name, repr(sorted((k, v) for k, v in options.items() if k != SAMPLE_DELAY))

"""Pre-flight: everything a command can refuse is refused here, in one line, before anything is written.

A study that fails an hour in - on a device the machine lacks, a results folder it cannot create or whose disk
has too little room left (`ablate.run.full_disk`), data that is not there - costs the hour; one refused before its
first measurement costs a second and leaves nothing to clean up. So `ablate run` and `ablate diagnose` pass through
these checks first (`report` and `sync` read `--device` here too), and each raises `StudyError`, which the command
line says in one line with exit status 2 (docs/recover.md).

The write probe is one: a folder made and removed where the command will write. Permission bits cannot answer
it, since root passes every permission check yet cannot write to /proc or a read-only mount.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ablate.config.validate import StudyError
from ablate.run import full_disk
from ablate.trial import library_log
from ablate.workload.registry import unknown

if TYPE_CHECKING:
    import torch

    from ablate.config.study import Study


@dataclass(frozen=True)
class Cleared:
    """What a run starts from, every check passed: the device, the study, the storage, the study's log."""

    device: torch.device
    study: Study
    storage: str  # the Optuna storage URL
    log: Path  # the study's log of library messages, made once one speaks (`ablate.trial.library_log`)


def device(text: str) -> torch.device:
    """`--device` as torch names it; a bare "cuda" is the current CUDA device, so the records, the MLflow tags and
    every trial say which one measured. Reading stored results (report, sync) needs no GPU: there "cuda" only
    names the results' device type."""
    import torch

    from ablate.config.study import DEVICE_TYPES
    from ablate.trial.machine import resolve

    try:
        found = torch.device(text)
    except RuntimeError:
        found = None
    if found is None or found.type not in DEVICE_TYPES:
        raise StudyError(unknown("device", [text], DEVICE_TYPES, tail="[:N]"))
    return resolve(found) if found.type == "cuda" and torch.cuda.is_available() else found


def runnable(device: torch.device) -> None:
    """Refuse a CUDA device this machine does not have."""
    import torch

    if device.type != "cuda":
        return
    if not torch.cuda.is_available():
        raise StudyError(f"--device {device} asked for, but no CUDA device is available; use --device cpu")
    if device.index is not None and device.index >= (count := torch.cuda.device_count()):
        raise StudyError(f"--device {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")


def run(shown: str, device_text: str, search: str, trials: int | None, workers: int, one_of_several: bool,
        storage: str | None, results: Path) -> Cleared:
    """`ablate run`'s and `ablate worker`'s checks, in the order a user meets them: the device, the options, the
    study (`shown`: as the user named it), the results and storage folders, the storage, the workers, the data.
    `one_of_several`: this process is one of several workers sharing the storage."""
    import torch

    from ablate.config import study as studies

    cleared_device = device(device_text)
    runnable(cleared_device)
    if search == "optuna" and not trials:
        raise StudyError("--search optuna needs --trials N")
    study = studies.load(shown, cleared_device.type)
    log = library_log.to_log_file(results / study.name / library_log.LOG_NAME, lazy=True)  # made if needed
    if search == "grid" and trials:
        raise StudyError(f"--trials applies to --search optuna; the grid runs all {study.size} combinations of "
                         f"{study.name}: drop --trials, or add --search optuna")
    writable(results, "results folder", "--results")
    full_disk.room(results, "--results")
    # Optuna is imported past the cheap checks: a bad option is refused before it loads, in a second.
    from ablate.store.storage import check, default_storage, shared, sqlite_path

    storage = storage or default_storage(study, results)
    check(storage)
    if not shared(storage) and one_of_several:
        raise StudyError(f"several workers need a server database for --storage (postgresql://... or mysql://...), "
                         f"not {storage.split(':')[0]}: SQLite is one process's")
    if workers > 1 and search != "grid":
        raise StudyError("--workers needs --search grid (workers share the grid's combinations)")
    if workers > 1 and cleared_device.type == "cuda" and workers > torch.cuda.device_count():
        raise StudyError(f"--workers {workers} with --device cuda needs {workers} GPUs (worker i on cuda:i), this "
                         f"machine has {torch.cuda.device_count()}")
    if database := sqlite_path(storage):
        writable(database.parent, "storage folder", "--storage")
        full_disk.room(database.parent, "--storage")
    data_present(study)
    return Cleared(cleared_device, study, storage, log)


def data_present(study: Study) -> None:
    """Load the study's data once, so that missing data fails now (`DataUnavailable`, said in one line)."""
    from ablate.workload import data

    data.load(study.dataset, **study.dataset_kwargs)


def writable(folder: Path, what: str, option: str) -> None:
    """`folder` can be created, or written to where it exists; else one line naming `option`, the way out."""
    existing = folder.absolute()
    while not existing.exists():  # False too below a regular file: its nearest existing ancestor says why
        existing = existing.parent
    if not existing.is_dir():
        raise StudyError(f"{what} {folder} cannot be created: {existing} is a file, not a folder; choose another "
                         f"with {option}")
    if refused := _refusal(existing):
        raise StudyError(f"{what} {folder} cannot be created: {existing} does not allow new folders ({refused}); "
                         f"choose another with {option}")


def destination(path: Path) -> Path:
    """`ablate diagnose --write-study`'s `path`: no file there, and a folder that takes new files."""
    from ablate.config.scaffold import target

    try:
        target("", path, option="--write-study")
    except FileExistsError as error:
        raise StudyError(str(error)) from None
    folder = path.parent
    if not folder.is_dir():
        missing = "" if folder.exists() else " (it does not exist)"
        raise StudyError(f"--write-study {path}: {folder} is not a folder{missing}; choose another path")
    if refused := _refusal(folder):
        raise StudyError(f"--write-study {path}: {folder} does not allow new files ({refused}); choose another path")
    return path


def _refusal(folder: Path) -> str | None:
    """Why `folder` refuses a new entry (the system's words), or None: one is made there and removed."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ablate-probe-", dir=folder))
    except OSError as error:
        return error.strerror or str(error)
    return None

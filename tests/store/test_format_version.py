"""The stored study says its format: written when created, read as 1 where it is absent (a store older than the
attribute), and a newer format than this code reads refused in one line before anything is misread."""
from __future__ import annotations

import tarfile
from pathlib import Path

import optuna
import pytest

from ablate.config.validate import StudyError
from ablate.store import study_record
from ablate.store.storage import create_study

BEFORE = Path(__file__).resolve().parents[1] / "support" / "before_the_move" / "tiny_stopped.tgz"


def _open(storage: str, name: str = "tiny:grid:cpu") -> tuple[optuna.Study, bool]:
    return create_study(storage, None, study_name=name, sampler=optuna.samplers.RandomSampler(seed=0),
                        directions=["maximize", "maximize"])


def test_a_created_study_stores_its_format(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    _, created = _open(storage)
    assert created
    stored = optuna.load_study(study_name="tiny:grid:cpu", storage=storage)  # read back from the database
    assert stored.user_attrs[study_record.FORMAT_ATTR] == study_record.FORMAT_VERSION == 1
    assert study_record.from_study(stored).format_version == 1


def test_a_store_from_before_the_version_reads_as_version_1(tmp_path: Path) -> None:
    """The tiny study stored at 46e5984 (tests/end_to_end/test_before_the_move.py resumes it)."""
    with tarfile.open(BEFORE) as archive:
        archive.extractall(tmp_path, filter="data")
    storage = f"sqlite:///{tmp_path / 'tiny' / 'optuna.db'}"
    stored, created = _open(storage)
    assert not created and study_record.FORMAT_ATTR not in stored.user_attrs
    record = study_record.from_study(stored)
    assert record.format_version == 1 and record.file_hash  # and what it stored reads as before


def test_a_newer_format_is_refused_in_one_line(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    stored, _ = _open(storage)
    stored.set_user_attr(study_record.FORMAT_ATTR, study_record.FORMAT_VERSION + 1)
    for read in (lambda: _open(storage), lambda: study_record.from_study(stored)):
        with pytest.raises(StudyError, match=r"in format 2, written by a newer ablate; this one reads formats up "
                                             r"to 1: upgrade ablate") as refused:
            read()
        assert "\n" not in str(refused.value)

"""optuna-dashboard labels objectives and Pareto axes with the names each study stores."""
from __future__ import annotations

from pathlib import Path

import optuna

from ablate.store.storage import METRIC_NAMES, create_study


def _create(storage: str, name: str) -> tuple[optuna.Study, bool]:
    return create_study(storage, None, study_name=name, sampler=optuna.samplers.RandomSampler(seed=0),
                        directions=["maximize", "maximize"])


def test_a_created_study_stores_its_objective_names(tmp_path: Path):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    _, created = _create(storage, "tiny:grid:cpu")
    assert created
    # Read back as optuna-dashboard does: a fresh load from the storage.
    assert optuna.load_study(study_name="tiny:grid:cpu", storage=storage).metric_names == METRIC_NAMES
    assert METRIC_NAMES == ["throughput (samples/s)", "test accuracy (%)"]


def test_a_study_stored_without_names_gets_them_when_loaded(tmp_path: Path):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    optuna.create_study(storage=storage, study_name="old", directions=["maximize", "maximize"])
    _, created = _create(storage, "old")
    assert not created
    assert optuna.load_study(study_name="old", storage=storage).metric_names == METRIC_NAMES


def test_naming_says_nothing_to_the_user(tmp_path: Path, recwarn):
    _create(f"sqlite:///{tmp_path / 'optuna.db'}", "quiet")
    assert not [w for w in recwarn if issubclass(w.category, optuna.exceptions.ExperimentalWarning)]


def test_a_language_model_study_names_its_throughput_in_tokens(tmp_path: Path):
    from ablate.store.storage import metric_names

    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    create_study(storage, None, metric_names("tokens"), study_name="gpt", sampler=optuna.samplers.RandomSampler(0),
                 directions=["maximize", "maximize"])
    assert optuna.load_study(study_name="gpt", storage=storage).metric_names == ["throughput (tokens/s)",
                                                                                  "test accuracy (%)"]

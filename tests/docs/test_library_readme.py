"""The examples for library models in docs/studies.md run as written: the own-loop example on a transformers
Llama, and the `hf:` study file, loaded and one of its trials trained and measured (offline: HF_HUB_OFFLINE=1)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the hf extra: pip install -e '.[hf]'")

from ablate.config import study
from ablate.trial import process  # noqa: E402
from ablate.workload import data

STUDIES_DOC = Path(__file__).resolve().parents[2] / "docs" / "studies.md"
KJV = data.data_root() / "kjv" / "kjv.txt"


def _block(marker: str, language: str) -> str:
    match = re.search(rf"<!-- {marker}[^>]*-->\s*```{language}\n(.*?)```", STUDIES_DOC.read_text(), re.S)
    assert match, f"docs/studies.md lost its {marker} example"
    return match.group(1)


def test_the_own_loop_example_on_a_transformers_model_runs(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    exec(compile(_block("docs-example-hf", "python"), "docs/studies.md", "exec"), {"__name__": "docs_example"})
    assert "AMP" in capsys.readouterr().out


@pytest.mark.skipif(not KJV.is_file(), reason=f"the KJV corpus is not at {KJV} (set ABLATE_DATA_DIR)")
def test_the_hf_study_example_loads_and_a_trial_trains(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "llama_docs.yaml"
    path.write_text(_block("docs-study", "yaml"))
    loaded = study.load(str(path), "cpu")
    assert loaded.size == 8 and loaded.throughput_unit == "tokens" and "bytes" in loaded.data_note
    checkpointed = tuple(options[-1] for _, options in loaded.space)  # bf16, regional compile, checkpointing
    metrics = process.run(process.TrialSpec(loaded, checkpointed[:1] + checkpointed[2:], "cpu", True))
    assert metrics["throughput"] > 0 and 0 <= metrics["test_accuracy"] <= 100 and metrics["test_loss"] > 0

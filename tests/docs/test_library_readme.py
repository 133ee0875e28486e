"""The examples for library models run as written: the own-loop example on a transformers Llama
(docs/own-loop.md), and the `hf:` study file (docs/own-model.md), loaded and one of its trials trained and measured
(offline: HF_HUB_OFFLINE=1)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the hf extra: pip install -e '.[hf]'")

from ablate.config import study
from ablate.trial import process
from ablate.workload import data

DOCS = Path(__file__).resolve().parents[2] / "docs"
KJV = data.data_root() / "kjv" / "kjv.txt"


def _block(page: str, marker: str, language: str) -> str:
    match = re.search(rf"<!-- {marker}[^>]*-->\s*```{language}\n(.*?)```", (DOCS / page).read_text(), re.S)
    assert match, f"docs/{page} lost its {marker} example"
    return match.group(1)


def test_the_own_loop_example_on_a_transformers_model_runs(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    example = _block("own-loop.md", "docs-example-hf", "python")
    exec(compile(example, "docs/own-loop.md", "exec"), {"__name__": "docs_example"})
    assert "AMP" in capsys.readouterr().out


@pytest.mark.skipif(not KJV.is_file(), reason=f"the KJV corpus is not at {KJV} (set ABLATE_DATA_DIR)")
def test_the_hf_study_example_loads_and_a_trial_trains(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "llama_docs.yaml"
    path.write_text(_block("own-model.md", "docs-study", "yaml"))
    loaded = study.load(str(path), "cpu")
    assert loaded.size == 8 and loaded.throughput_unit == "tokens" and "bytes" in loaded.data_note
    checkpointed = tuple(options[-1] for _, options in loaded.space)  # bf16, regional compile, checkpointing
    metrics = process.run(process.TrialSpec(loaded, checkpointed[:1] + checkpointed[2:], "cpu", True))
    assert metrics["throughput"] > 0 and 0 <= metrics["test_accuracy"] <= 100 and metrics["test_loss"] > 0

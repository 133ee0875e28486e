"""docs/api.md stays true: every import it shows works, its tables name every public name of `ablate` and
`strategies` and every shim, and `summary.json` carries the fields it documents, no more and no fewer."""
from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest

import ablate
import strategies
from ablate._moved import MOVED

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _block(marker: str) -> str:
    match = re.search(rf"<!-- {marker}[^>]*-->\s*```python\n(.*?)```", API.read_text(), re.S)
    assert match, f"docs/api.md lost its {marker} block"
    return match.group(1)


def _rows(marker: str) -> list[list[str]]:
    """The cells of each row of the table after `<!-- marker ... -->`."""
    match = re.search(rf"<!-- {marker}\b[^>]*-->\n((?:\|.*(?:\n|$))+)", API.read_text())
    assert match, f"no table right after <!-- {marker} --> in docs/api.md"
    return [[cell.strip() for cell in row.split("|")[1:-1]] for row in match.group(1).splitlines()[2:]]


def _names(marker: str) -> list[str]:
    """The `code` names in the first column of the table after `<!-- marker ... -->`."""
    return [name for row in _rows(marker) for name in re.findall(r"`([^`]+)`", row[0])]


def test_every_documented_import_works() -> None:
    found: dict[str, object] = {}
    for line in _block("docs-imports").splitlines():
        exec(compile(line, "docs/api.md", "exec"), found)
    assert isinstance(found["train"], types.FunctionType) and found["Splits"] is ablate.Splits


def test_the_opening_example_imports() -> None:
    found: dict[str, object] = {}
    exec(compile(_block("api-opening-example"), "docs/api.md", "exec"), found)
    assert found["Splits"] is ablate.Splits and found["compose"] is strategies.compose


def test_the_example_of_a_users_dataset_and_loss_runs() -> None:
    found: dict[str, object] = {"__name__": "docs_api_example"}
    exec(compile(_block("docs-example-api"), "docs/api.md", "exec"), found)
    splits = found["splits"](Path("data"))  # type: ignore[operator]
    assert isinstance(splits, ablate.Splits) and len(splits.train) + len(splits.test) == 256
    torch = pytest.importorskip("torch")
    batch = splits.train[:4]
    assert found["loss"](torch.nn.Linear(8, 2), batch).ndim == 0  # type: ignore[operator]


def test_the_page_names_every_public_name_once() -> None:
    for marker, exported in (("public-ablate", ablate.__all__), ("public-strategies", strategies.__all__)):
        names = _names(marker)
        assert sorted(names) == sorted(exported), f"{marker}: {sorted(set(names) ^ set(exported))}"


def test_the_shim_table_is_the_shims() -> None:
    rows = {old.strip("`"): (instead.strip("`"), removed_in) for old, instead, removed_in in _rows("shims")}
    assert rows == {old: (moved.instead, moved.removed_in) for old, moved in MOVED.items()}


def test_summary_json_carries_the_documented_fields(tmp_path: Path) -> None:
    """What ablate writes, from a small stored study, against the two field tables (the top level and an entry)."""
    from ablate.config import study
    from ablate.config.choices import BASELINE
    from ablate.render import report
    from ablate.render.summaries import SCHEMA_VERSION
    from ablate.stats.answer.comparison import compare_stored
    from ablate.stats.answer.findings import analyse_all
    from ablate.store.records import Record, combine
    from ablate.store.study_record import StudyRecord
    from ablate.trial import metrics as metric

    machine = {"device": "cpu", "device_name": "a CPU", "torch": "2.11", "commit": "c", "host": "h"}
    path = tmp_path / "s.yaml"
    path.write_text("model: mnist_cnn\ndataset: mnist\nspace: {amp: [off, {amp: {dtype: bf16}}]}\n"
                    "budget: {throughput_only: true}\n")
    loaded = study.load(str(path), "cpu")

    def measured(number: int, combination: str, block: int) -> Record:
        rate = 100.0 * (2 if combination != BASELINE else 1) * (1 + block / 50)
        return Record(number, combination, {"amp": "off" if combination == BASELINE else combination}, "complete",
                      block=block, machine=machine, metrics={metric.THROUGHPUT: rate, "throughput_window_0": rate})

    records = combine([measured(2 * b, BASELINE, b) for b in range(3)]
                      + [measured(2 * b + 1, "amp(dtype=bf16)", b) for b in range(3)])
    (compared,) = compare_stored(loaded, records, StudyRecord())
    (built,) = report.build(loaded, analyse_all(loaded, [compared], StudyRecord()), "grid", tmp_path / "report")
    written = json.loads(built.summary_json.read_text())

    assert written["schema_version"] == SCHEMA_VERSION == 1
    assert sorted(written) == sorted(_names("summary-fields"))
    assert written["speedups"]
    for entry in written["speedups"]:
        assert sorted(entry) == sorted(_names("summary-entry-fields")), entry["combination"]

"""The load guard's summary is computed once (`ablate.stats.answer.comparison.machine_load`), under the design the run
followed, and every surface renders that one reading: the report's words, its MLflow metrics and summary.json."""
from __future__ import annotations

import json
from pathlib import Path

from ablate.config import study
from ablate.config.choices import BASELINE
from ablate.config.design import ProtocolSettings
from ablate.render import report
from ablate.stats.answer.comparison import compare_stored
from ablate.stats.answer.findings import analyse_all
from ablate.store.records import Record, combine
from ablate.store.study_record import StudyRecord
from ablate.trial import metrics as metric

MACHINE = {"device": "cpu", "device_name": "a CPU", "torch": "2.11", "commit": "c", "host": "h"}


def _measured(number: int, combination: str, block: int, cores: float, again: float) -> Record:
    levels = {"amp": "off" if combination == BASELINE else combination}
    rate = 100.0 * (2 if combination != BASELINE else 1) * (1 + block / 50)
    return Record(number, combination, levels, "complete", block=block, machine=MACHINE,
                  metrics={metric.THROUGHPUT: rate, "throughput_window_0": rate, metric.FOREIGN_CORES: cores,
                           metric.REMEASURED: again})


def test_every_surface_gives_the_load_guard_of_the_design_the_run_followed(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"  # the study file says 0.5 cores; the run followed 0.1 (an override it stored)
    path.write_text("model: byte_gpt\ndataset: kjv\ntask: next_token\nspace: {amp: [off, {amp: {dtype: bf16}}]}\n"
                    "budget: {throughput_only: true}\nprotocol: {foreign_load_limit: 0.5}\n")
    loaded = study.load(str(path), "cpu")
    assert loaded.protocol.foreign_load_limit == 0.5
    followed = {**ProtocolSettings().__dict__, "foreign_load_limit": 0.1}
    loads = [(0.05, 0.0), (0.3, 2.0), (0.02, 1.0)]  # 0.3 is disturbed under 0.1, not under 0.5
    records = combine([_measured(2 * b, BASELINE, b, *loads[b]) for b in range(3)]
                      + [_measured(2 * b + 1, "amp(dtype=bf16)", b, 0.04, 0.0) for b in range(3)])
    (compared,) = compare_stored(loaded, records, StudyRecord(protocol=followed))
    found = analyse_all(loaded, [compared], StudyRecord(protocol=followed))
    (built,) = report.build(loaded, found, "grid", tmp_path / "report")

    assert compared.load.limit == 0.1 and compared.load.still_disturbed == 1 and compared.load.taken_again == 3
    summary = json.loads(built.summary_json.read_text())["machine_load"]
    assert summary == {"foreign_load_limit": 0.1, **compared.load.figures}
    assert {k.removeprefix("load."): v for k, v in built.metrics.items() if k.startswith("load.")} == \
        compared.load.figures
    text = built.markdown.read_text()
    assert "more than 0.1 cores" in text and "1 measurement was kept though still disturbed" in text
    assert "0.30 foreign cores" in text

"""How a change between two studies reads (`ablate compare`): the table keeps to 100 columns, says each verdict in
words, puts the baselines' absolute throughput first, and the page and the JSON carry the same rows."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from ablate.render import glossary
from ablate.render.change_page import FIGURE, page
from ablate.render.change_table import table
from ablate.render.changes import ABSOLUTE_LABEL, ComparedStudy, StudyChange, as_json, verdict
from ablate.stats import changes
from ablate.stats.changes import BASELINE_ABSOLUTE, Change, Side

LONG = "amp(dtype=bf16) + channels_last + compile(mode=max-autotune, regional=True) + fused_optimizer(foreach=True)"
ROWS = ["amp(dtype=bf16)", "compile(regional=True)", "channels_last", LONG, "cuda_graphs", "old_trick", "new_trick",
        "fused_optimizer(foreach=True)"]


def _address(line: str) -> bool:
    """A path or a URL on a line of its own, as tests/end_to_end/test_end_to_end.py reads one."""
    word = line.strip()
    return " " not in word and ("/" in word or "://" in word)


def _study(label: str, torch: str, threads: str, rows: list[str], phases: dict[str, float] | None) -> ComparedStudy:
    environment = {"device name": "AMD EPYC 9354 32-Core Processor", "host": "bench-01", "python": "3.12.3",
                   "torch": torch, "threads": threads, "cuda": "unknown", "cudnn": "unknown", "driver": "unknown",
                   "gpu uuid": "unknown", "commit": f"{label.lower() * 7}0123456789abcdef0123456789abcdef0"}
    return ComparedStudy(label, f"/work/results-{label}/a-rather-long-folder-name-for-the-results-of-a-torch-upgrade/"
                        "repro16/report/grid/summary.json", "repro16", "cpu", environment,
                 {"study": "repro16", "model": "resnet18", "budget.train_samples": "2048"}, "samples/s",
                 "amp(dtype=bf16)", (1.52, 1.40, 1.65),
                 {r: 1000.0 + 10 * i for i, r in enumerate(rows)} | {"baseline": 900.0},
                 {r: "ok" for r in rows} | ({"amp(dtype=bf16)": "below"} if label == "B" else {}), phases,
                 {r: (1.2, 1.1, 1.3) for r in rows})


def _side(log: float, predicted: bool = False) -> Side:
    return Side(log, 0.03, 11.0, predicted)


def _change(row: str, verdict_: str, log: float | None, bound: float | None = None, a: bool = True,
            b: bool = True, interval: bool = True) -> Change:
    half = 0.05
    level = math.log(900.0) if row == BASELINE_ABSOLUTE else 0.2
    return Change(row, _side(level, verdict_ == changes.PREDICTED) if a else None,
                  _side(level + (log or 0)) if b else None,
                  log, log - half if log is not None and interval else None,
                  log + half if log is not None and interval else None, verdict_,
                  (0.12 if row == LONG else 0.09) if interval and log is not None and verdict_ != changes.PREDICTED
                  else None, bound, 0.05 if interval else None, 0.042,
                  math.inf if row == "cuda_graphs" else 20.5, 0.01)


@pytest.fixture
def change() -> StudyChange:
    """Every verdict once, the absolute row listed last (the render puts it first), a name longer than a line."""
    rows = [_change(ROWS[0], changes.MOVED, math.log(1.12)),
            _change(ROWS[1], changes.SAME, 0.0),
            _change(ROWS[2], changes.NOT_SHOWN, 0.02, bound=0.09),
            _change(ROWS[3], changes.NOT_SHOWN, 0.01, bound=0.31),
            _change(ROWS[4], changes.NOT_SHOWN, 0.03, interval=False),
            _change(ROWS[7], changes.PREDICTED, -0.04),
            _change(ROWS[5], changes.ONLY_A, None, b=False),
            _change(ROWS[6], changes.ONLY_B, None, a=False),
            _change(BASELINE_ABSOLUTE, changes.MOVED, math.log(0.85))]
    a = _study("A", "2.10.0", "32", ROWS[:5] + ROWS[7:], {"data": 0.02, "copy": 0.01, "forward": 0.3,
                                                           "backward": 0.55, "optimizer": 0.1, "other": 0.02})
    b = _study("B", "2.11.0", "1", ROWS[:5] + ROWS[6:], None)
    return StudyChange(a, b, rows, 0.05, 0.05, 0.10, [ROWS[0], BASELINE_ABSOLUTE])


def test_every_line_keeps_to_100_columns_but_an_address_alone(change):
    text = table(change)
    assert [line for line in text.splitlines() if len(line) > 100 and not _address(line)] == [], text
    assert any(_address(line) and line.strip() == change.a.source for line in text.splitlines())  # too long beside A:


def test_each_verdict_reads_as_its_words(change):
    words = [verdict(c, change.margin) for c in change.rows]
    assert words == ["moved +12%", "same (within +-5%)", "no change shown (up to +-9%)",
                     "no change shown (up to +-31%)", "no change shown (no interval)", "a model prediction",
                     "only in A", "only in B", "moved -15%"]
    text = table(change)
    for first in ("moved +12%", "same (within +-5%)", "no change shown", "(up to +-31%)", "a model prediction",
                  "only in A", "only in B", "moved -15%"):
        assert first in text, first
    rows = {r["row"]: r for r in as_json(change)["rows"]}
    assert {r["words"] for r in rows.values()} == set(words)


def test_the_baselines_absolute_row_comes_first(change):
    lines = table(change).splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#"))
    rule = next(i for i in range(header + 1, len(lines)) if set(lines[i].strip()) <= {"-", " "})
    first = lines[rule + 1]
    assert ABSOLUTE_LABEL in first and "moved -15%" in first and "x0.85" in first
    rows = as_json(change)["rows"]
    assert rows[0]["row"] == BASELINE_ABSOLUTE and rows[0]["a"]["speedup"] is None
    assert rows[0]["a"]["throughput"] == pytest.approx(900.0)  # the level the ratio compares
    assert "900 -> 765" in first
    assert [r["verdict"] for r in rows[1:3]] == [changes.MOVED, changes.NOT_SHOWN]  # moved, then what is not shown


def test_rows_only_in_one_study_have_no_ratio_and_one_side(change):
    rows = {r["row"]: r for r in as_json(change)["rows"]}
    only_a, only_b = rows["old_trick"], rows["new_trick"]
    assert only_a["verdict"] == changes.ONLY_A and only_a["b"] is None and only_a["a"]["speedup"] > 0
    assert only_b["verdict"] == changes.ONLY_B and only_b["a"] is None and only_b["b"]["throughput"] == 1050.0
    assert only_a["ratio"] is None and only_b["low"] is None


def test_the_json_is_strict_json_that_round_trips(change):
    written = as_json(change)
    assert json.loads(json.dumps(written, allow_nan=False)) == written  # an infinite df is null, not Infinity
    assert written["schema_version"] == 1 and written["beyond"] == [ROWS[0], BASELINE_ABSOLUTE]
    graphs = next(r for r in written["rows"] if r["row"] == "cuda_graphs")
    assert graphs["df"] is None and graphs["low"] is None and graphs["detectable"] is None
    moved = next(r for r in written["rows"] if r["row"] == ROWS[0])
    assert moved["ratio"] == pytest.approx(1.12) and moved["low"] < 1.12 < moved["high"]
    assert (moved["a"]["low"], moved["a"]["high"]) == (1.1, 1.3)  # the interval the study printed
    assert written["a"]["environment"]["torch"] == "2.10.0" and written["b"]["settings"]["model"] == "resnet18"
    assert written["a"]["headline"] == {"combination": "amp(dtype=bf16)", "speedup": 1.52, "low": 1.40, "high": 1.65}
    assert written["b"]["baseline_phases"] is None and not written["headline_changed"]


def test_the_table_says_what_differs_and_what_else_it_shows(change):
    text = table(change)
    differs = text[text.index("differs"):text.index("the same in both: ")]
    assert "threads" in differs and "torch" in differs and "2.11.0" in differs and "python" not in differs
    assert "environment field" in text[text.index("the same in both: "):]
    assert f"exit status 1: moved beyond +-10% (--fail-above; marked !): amp(bf16), {ABSOLUTE_LABEL}" in text
    assert "moved -15% !" in text  # beyond the threshold, marked
    assert "recommended in B: amp(dtype=bf16) (x1.52 [1.40, 1.65]): the same combination" in text
    assert "accuracy parity changed (1): amp(bf16): ok -> below" in text
    assert "not profiled" in text and "55%" in text  # the baselines' phases, A's and B's
    assert "80% of the time: 9% for amp(bf16) to 12% for amp(bf16) + ch_last" in " ".join(text.split())


def test_the_page_writes_markdown_html_and_its_picture(change, tmp_path):
    md = page(change, tmp_path / "out")
    folder = md.parent
    assert md == folder / "change.md" and (folder / FIGURE).stat().st_size > 0
    text = md.read_text()
    assert f"]({FIGURE})" in text and "no change shown (up to +-31%)" in text and LONG in text
    assert text.index(ABSOLUTE_LABEL) < text.index(ROWS[0])
    html = (folder / "change.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html


def test_the_page_defines_the_verdict_words_its_rows_and_parity_line_use(change, tmp_path):
    text = page(change, tmp_path / "out").read_text()
    footnote = text[text.index(f"## {glossary.TITLE}"):text.index("## The two environments")]
    defined = [w for w, sentence in glossary.WORDS.items() if f"- **{w}**: {sentence}" in footnote]
    # The rows' verdicts, then the parity line's (amp: ok -> below); none the rows do not use.
    assert footnote.index("**moved**") < footnote.index("**ok**")
    assert sorted(defined) == sorted(["moved", "same", "no change shown", "ok", "below"]), footnote
    # No verdict in the rows or the parity line: no footnote, although the legend and the headline ("the same
    # combination") use the words in passing.
    unjudged = [c for c in change.rows if c.verdict in (changes.ONLY_A, changes.ONLY_B)]
    alone = page(StudyChange(change.a, change.a, unjudged, 0.05, 0.05, None, []), tmp_path / "alone").read_text()
    assert "the same combination" in alone and f"## {glossary.TITLE}" not in alone


def test_the_title_names_what_differs_where_study_and_device_agree(change, tmp_path):
    # One study on one device: its environment's differences, the first two (torch and threads here).
    assert page(change, tmp_path / "one").read_text().startswith(
        "# What changed: repro16 on cpu, torch 2.10.0 -> 2.11.0; threads 32 -> 1\n")
    elsewhere = StudyChange(change.a, dataclasses.replace(change.b, device="cuda"), change.rows, 0.05, 0.05, 0.10, [])
    text = page(elsewhere, tmp_path / "two").read_text()
    assert text.startswith("# What changed: repro16 on cpu -> repro16 on cuda\n")


def test_a_change_as_stats_judges_it_renders_within_its_width():
    """Rows as `ablate.stats.changes.change` judges them from hand-made sides."""
    a = {BASELINE_ABSOLUTE: Side(math.log(1000.0), 0.01, 11.0), "amp(dtype=bf16)": Side(0.4, 0.02, 11.0),
         "compile(regional=True)": Side(0.1, 0.02, 11.0), "channels_last": Side(0.05, 0.2, 3.0),
         "predicted": Side(0.2, 0.05, math.inf, predicted=True), "gone": Side(0.1, 0.02, 11.0)}
    b = {BASELINE_ABSOLUTE: Side(math.log(800.0), 0.01, 11.0), "amp(dtype=bf16)": Side(0.6, 0.02, 11.0),
         "compile(regional=True)": Side(0.1, 0.005, 11.0), "channels_last": Side(0.05, 0.2, 3.0),
         "predicted": Side(0.3, 0.05, math.inf), "new": Side(0.0, None, 0.0)}
    rows = changes.change(a, b)
    s = _study("A", "2.10.0", "32", list(a), None)
    change = StudyChange(s, _study("B", "2.10.0", "32", list(b), None), rows, changes.DEFAULT_MARGIN, 0.05, None, [])
    text = table(change)
    assert [line for line in text.splitlines() if len(line) > 100 and not _address(line)] == [], text
    assert "environment and settings: the same in both" not in table(change)  # the commits differ
    verdicts = {r["row"]: r["verdict"] for r in json.loads(json.dumps(as_json(change), allow_nan=False))["rows"]}
    assert verdicts[BASELINE_ABSOLUTE] == changes.MOVED and verdicts["predicted"] == changes.PREDICTED
    assert verdicts["gone"] == changes.ONLY_A and verdicts["new"] == changes.ONLY_B

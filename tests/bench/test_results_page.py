"""benchmarks/RESULTS.md reads as a front page: every current figure has its commit, date and spread and links to
the section that measured it, in cells of at most 25 words, and every section kept under the front page is one a
current figure links to (the others belong in benchmarks/history/). That the links resolve is
tests/docs/test_docs.py's check."""
from __future__ import annotations

import re

from benchmarks.gpu import ledger
from benchmarks.sections import RESULTS, section_pattern

FRONT_END = "\n# Sections: "  # the front page ends where the sections behind it begin
MAX_WORDS = 25  # a cell: the figure, its spread, commit, date, link; one screen a kind, the detail in the section


def _front_and_sections() -> tuple[str, str]:
    text = RESULTS.read_text()
    assert FRONT_END in text, "RESULTS.md has no '# Sections: ...' heading under its front page"
    front, _, sections = text.partition(FRONT_END)
    return front, sections


def test_every_row_on_the_front_page_has_its_commit_date_spread_and_section():
    front = section_pattern("front-gpu").sub("", _front_and_sections()[0])  # generated: tests/bench/test_gpu_front
    rows = [line for line in front.splitlines() if line.startswith("| ") and not line.startswith("| what it measures")]
    assert len(rows) >= 10
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
        assert len(cells) == 6, row
        what, figure, spread, commit, date, section = cells
        assert what and figure and re.search(r"\b[0-9a-f]{7}\b", commit), row
        assert re.fullmatch(r"\d{4}-\d\d-\d\d|not stated", date), row
        assert re.fullmatch(r"\[[^\]]+\]\([^)]*#[^)]+\)", section), f"no link to its section: {row}"
        assert spread, f"no spread: {row}"


def test_every_cell_of_every_front_table_fits_in_25_words():
    long = []
    for row in (line for line in _front_and_sections()[0].splitlines() if line.startswith("| ")):
        for cell in re.split(r"(?<!\\)\|", row.strip().strip("|")):
            words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell).split()  # a link counts by its text
            if len(words) > MAX_WORDS:
                long.append(f"{len(words)} words: {cell.strip()[:80]}")
    assert not long, f"front-page cells over {MAX_WORDS} words (move the detail to the linked section): {long}"


def test_every_section_under_the_front_page_holds_a_current_figure():
    front, sections = _front_and_sections()
    linked = set(re.findall(r"\]\(#([^)]+)\)", front))
    chunks = re.split(r"^(?=## )", sections, flags=re.M)[1:]  # each section with its subsections
    assert chunks
    orphans = [chunk.splitlines()[0] for chunk in chunks  # linked by its heading or one of its subsections'
               if not {ledger.anchor(h) for h in re.findall(r"^#{2,3} (.+)$", chunk, re.M)} & linked]
    assert not orphans, f"sections no current figure links to (move them to benchmarks/history/): {orphans}"

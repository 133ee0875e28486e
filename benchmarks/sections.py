"""benchmarks/RESULTS.md is written in marked sections, one per writer; everything outside the markers is kept.

RESULTS.md is a front page (the current figures per kind of machine) over the sections that explain them; a section
whose figures a later one superseded moves to benchmarks/history/. So besides rewriting its own section, a writer
may retire one: take it out of RESULTS.md and append it, without its markers, to a history file.
"""
from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HISTORY = "history"  # beside RESULTS.md: the superseded sections, one file per theme
TITLE = "# Benchmark records\n"


def section_pattern(kind: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- bench:{re.escape(kind)}:start.*?<!-- bench:{re.escape(kind)}:end -->", flags=re.S)


def kinds(text: str, prefix: str = "") -> list[str]:
    """The kinds of the sections in `text` whose kind starts with `prefix`, in the order they stand."""
    return re.findall(rf"<!-- bench:({re.escape(prefix)}\S*?):start", text)


def rewrite(path: Path, kind: str, section: str, *, new_at_top: bool = False) -> None:
    """Replace the `kind` section of `path` with `section` (markers included); a new one is appended, or with
    `new_at_top` placed right under the file's title (the front page's own blocks)."""
    text = path.read_text() if path.exists() else TITLE
    pattern = section_pattern(kind)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    elif new_at_top:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{section}\n\n{rest.lstrip(chr(10))}"
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)  # a bench run with --output in a new folder (make gpu's part 2)
    path.write_text(text)


def retire(path: Path, kind: str, history: Path, heading: str) -> bool:
    """Move the `kind` section of `path` to the end of `history` (created under `heading` where new), its markers
    left behind; False where `path` has no such section."""
    text = path.read_text() if path.exists() else ""
    found = section_pattern(kind).search(text)
    if found is None:
        return False
    body = "\n".join(line for line in found.group(0).splitlines() if not line.startswith("<!-- bench:")).strip()
    kept = (text[:found.start()].rstrip() + "\n\n" + text[found.end():].lstrip()).rstrip() + "\n"
    old = history.read_text() if history.exists() else heading.rstrip() + "\n"
    history.parent.mkdir(parents=True, exist_ok=True)
    history.write_text(old.rstrip() + "\n\n" + body + "\n")  # history first: a crash between keeps both copies
    path.write_text(kept)
    return True

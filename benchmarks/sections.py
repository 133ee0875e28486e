"""benchmarks/RESULTS.md is written in marked sections, one per writer; everything outside the markers is kept."""
from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def section_pattern(kind: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- bench:{re.escape(kind)}:start.*?<!-- bench:{re.escape(kind)}:end -->", flags=re.S)


def rewrite(path: Path, kind: str, section: str) -> None:
    """Replace the `kind` section of `path` with `section` (markers included), or append it."""
    text = path.read_text() if path.exists() else "# Benchmark records\n"
    pattern = section_pattern(kind)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)  # a bench run with --output in a new folder (make gpu's part 2)
    path.write_text(text)

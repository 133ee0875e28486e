"""How long the docs' sentences are: words a sentence, mean and 90th percentile, per page.

    python -m benchmarks.docs_words [PAGE.md ...]    (default: README.md and docs/*.md)

A user page (a tutorial, a how-to, a reference) reads well at about 20 words a sentence; the evidence pages may
run longer. Prose only: code blocks, indented blocks, tables, headings and HTML comments are left out, and a
list item counts as a sentence of its own. Sentences end at '.', '?' or '!' followed by a space and a capital
letter or the line's end; abbreviations such as "e.g." are not split on.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.")


@dataclass(frozen=True)
class Page:
    path: Path
    lengths: list[int]  # words in each sentence

    @property
    def mean(self) -> float:
        return statistics.fmean(self.lengths) if self.lengths else 0.0

    @property
    def p90(self) -> float:
        if len(self.lengths) < 2:
            return float(self.lengths[0]) if self.lengths else 0.0
        return statistics.quantiles(self.lengths, n=10, method="inclusive")[-1]


def prose(text: str) -> list[str]:
    """The page's paragraphs and list items, code, tables, headings and comments left out."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"^```.*?^```[ \t]*$", " ", text, flags=re.S | re.M)
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        item = re.match(r"([-*+]|\d+\.)\s+", stripped)
        if not stripped or stripped.startswith(("#", "|")) or line.startswith(("    ", "\t")) or item:
            if current:  # a blank line, a heading, a table, an indented code line or a new item ends a block
                blocks.append(" ".join(current))
                current = []
            if not item:
                continue
        current.append(stripped[item.end():] if item else stripped)
    if current:
        blocks.append(" ".join(current))
    return blocks


def sentences(block: str) -> list[str]:
    guarded = block
    for i, abbreviation in enumerate(ABBREVIATIONS):
        guarded = guarded.replace(abbreviation, f"\0{i}\0")
    parts = re.split(r"(?<=[.?!])\s+(?=[A-Z`*\[(\"])", guarded)
    for i, abbreviation in enumerate(ABBREVIATIONS):
        parts = [part.replace(f"\0{i}\0", abbreviation) for part in parts]
    return [p for p in (part.strip() for part in parts) if p]


def words(sentence: str) -> int:
    plain = re.sub(r"\]\([^)]*\)", "]", sentence)  # a link's address is no word
    return len(re.findall(r"[\w`'][\w`'./:%+-]*", plain))


def measure(path: Path) -> Page:
    lengths = [n for block in prose(path.read_text()) for s in sentences(block) if (n := words(s)) > 0]
    return Page(path, lengths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.docs_words", description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", type=Path, help="Markdown pages (default: README.md and docs/*.md)")
    args = parser.parse_args(argv)
    pages = args.pages or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [str(p) for p in pages if not p.is_file()]
    if missing:
        print(f"docs_words: no such page: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(f"{'page':<28} {'sentences':>9} {'mean':>6} {'p90':>6} {'over 40':>8}")
    for page in map(measure, pages):
        over = sum(n > 40 for n in page.lengths)
        name = str(page.path.relative_to(ROOT)) if page.path.is_relative_to(ROOT) else str(page.path)
        print(f"{name:<28} {len(page.lengths):>9} {page.mean:>6.1f} {page.p90:>6.1f} {over:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

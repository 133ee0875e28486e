"""The docs the code cites exist: every docs page named in ablate/, strategies/ and benchmarks/ source, and the
section it names, either as `docs/PAGE.md#anchor` or as `docs/PAGE.md, "Section title"` (the way docstrings name
one), is a heading of that page. A section moved to another page fails here until its citations follow it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_docs import FENCE, ROOT, slugs

SOURCES = ("ablate", "strategies", "benchmarks")
SUFFIXES = {".py", ".yaml", ".yml", ".toml", ".cfg"}
PAGE = r"docs/([\w.-]+\.md)"
ANCHOR = re.compile(PAGE + r"#([\w-]+)")
TITLES = re.compile(PAGE + r',\s+((?:"[^"]+"(?:,?\s+and\s+)?)+)')  # docs/X.md, "A" and "B"
WRAP = re.compile(r"\n[ \t]*(?:#[ \t]*)?")  # a docstring's or a comment's line break, read as a space


def sources() -> list[Path]:
    return sorted(p for top in SOURCES for p in (ROOT / top).rglob("*")
                  if p.suffix in SUFFIXES and p.is_file() and "__pycache__" not in p.parts)


def titles(page: Path) -> set[str]:
    """The page's headings as a reader quotes them: lower case, spaces collapsed, backticks dropped."""
    return {said(h) for h in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", page.read_text()), re.M)}


def said(title: str) -> str:
    return " ".join(title.replace("`", "").lower().split())


def citations(text: str) -> list[tuple[str, str, str]]:
    """(page, "anchor" or "title", what) for each section the text cites."""
    flat = WRAP.sub(" ", text)
    found = [(page, "anchor", anchor) for page, anchor in ANCHOR.findall(flat)]
    for page, quoted in TITLES.findall(flat):
        found += [(page, "title", title) for title in re.findall(r'"([^"]+)"', quoted)]
    return found


def test_the_rule_reads_anchors_titles_and_wrapped_lines() -> None:
    text = ('see docs/measuring.md#the-protocol and (docs/evidence.md, "Evidence: the\n'
            '    # race" and "Evidence: two-level processes"); docs/results.md alone')
    assert citations(text) == [("measuring.md", "anchor", "the-protocol"),
                               ("evidence.md", "title", "Evidence: the race"),
                               ("evidence.md", "title", "Evidence: two-level processes")]


@pytest.mark.parametrize("source", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_docs_section_exists(source: Path) -> None:
    text = source.read_text(encoding="utf-8")
    broken = [f"docs/{page} (no such page)" for page in sorted(set(re.findall(PAGE, text)))
              if not (ROOT / "docs" / page).is_file()]
    for page, kind, what in citations(text):
        path = ROOT / "docs" / page
        if not path.is_file():
            continue
        if kind == "anchor" and what not in slugs(path.read_text()):
            broken.append(f"docs/{page}#{what} (no such heading)")
        if kind == "title" and said(what) not in titles(path):
            broken.append(f'docs/{page}, "{what}" (no heading with that title)')
    assert not broken, f"{source.relative_to(ROOT)} cites what the docs do not have: {broken}"

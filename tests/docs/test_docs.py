"""The README and docs/ stay true to the code and to each other.

The strategy and preset tables in docs/strategies.md have one row per name in `strategies.REGISTRY` and
`strategies.PRESETS`, and its targets table says what each class's `targets` says; the README's intro names every
registered strategy; every relative link in README.md, docs/*.md and the benchmark records (benchmarks/RESULTS.md,
whose front page links each current figure to its section, and benchmarks/history/) points at a file in the
repository (and a heading that exists, where it names one); the README stays short and free of paths outside the
repository. The docs' examples are executed by tests/docs/test_readme.py, test_library_readme.py and test_api.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from strategies import PRESETS, REGISTRY

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target); alt text may span lines


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), *records()]


def records() -> list[Path]:
    return [ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "benchmarks" / "history").glob("*.md"))]


def table_names(text: str, marker: str) -> list[str]:
    """The first cell of every row of the Markdown table that follows `<!-- marker ... -->`, backticks stripped."""
    return table_cells(text, marker, 1)


def table_cells(text: str, marker: str, column: int) -> list[str]:
    """Cell `column` (from 1) of every row of the Markdown table that follows `<!-- marker ... -->`, backticks
    stripped."""
    match = re.search(rf"<!-- {marker}\b[^>]*-->\n((?:\|.*(?:\n|$))+)", text)
    assert match, f"no table right after <!-- {marker} -->"
    rows = match.group(1).splitlines()[2:]  # past the header and its |---| rule
    return [row.split("|")[column].strip().strip("`") for row in rows]


def slugs(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (outside code blocks), duplicates numbered as it does."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_the_strategy_table_has_one_row_per_registered_strategy():
    names = table_names((DOCS / "strategies.md").read_text(), "strategy-table")
    assert len(names) == len(set(names)), f"rows named twice: {sorted({n for n in names if names.count(n) > 1})}"
    assert set(names) == set(REGISTRY), (f"docs/strategies.md lacks rows for {sorted(set(REGISTRY) - set(names))} "
                                         f"and has rows for no strategy: {sorted(set(names) - set(REGISTRY))}")


def test_the_targets_table_says_what_each_strategy_declares():
    text = (DOCS / "strategies.md").read_text()
    rows = dict(zip(table_names(text, "targets-table"), table_cells(text, "targets-table", 2)))
    assert set(rows) == set(REGISTRY), sorted(set(rows) ^ set(REGISTRY))
    wrong = {name: cell for name, cell in rows.items() if set(cell.split(", ")) != REGISTRY[name].targets}
    assert not wrong, f"docs/strategies.md's targets differ from the classes' `targets`: {wrong}"


def test_the_preset_table_has_one_row_per_preset():
    names = table_names((DOCS / "strategies.md").read_text(), "preset-table")
    assert sorted(names) == sorted(PRESETS), (names, sorted(PRESETS))


def test_the_readme_lists_every_strategy_with_its_object():
    text = README.read_text()
    rows = dict(zip(table_names(text, "readme-strategies"), table_cells(text, "readme-strategies", 2)))
    assert set(rows) == set(REGISTRY), sorted(set(rows) ^ set(REGISTRY))
    wrong = {name: obj for name, obj in rows.items() if not obj.startswith(f"{REGISTRY[name].__name__}(")}
    assert not wrong, f"the README names the wrong object for {wrong}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_something_that_exists(page: Path):
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() or not resolved.is_relative_to(ROOT):
            broken.append(f"{target} (no such file in the repository)")
        elif anchor and resolved.suffix == ".md" and anchor not in slugs(resolved.read_text()):
            broken.append(f"{target} (no heading #{anchor} in {resolved.relative_to(ROOT)})")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_the_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/ (at most {README_MAX_LINES})"


def test_the_readme_names_no_path_outside_the_repository():
    # The team's own dev-box helpers (../shared/...) are not something users have; docs/contributing.md says so.
    assert "../shared" not in README.read_text()

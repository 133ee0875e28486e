"""The strategies' examples run as written: the own-loop example and the preset (docs/own-loop.md, the how-to
the README links) and the opening example of docs/strategies.md."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _block(page: str, marker: str) -> str:
    match = re.search(rf"<!-- {marker}[^>]*-->\s*```python\n(.*?)```", (DOCS / page).read_text(), re.S)
    assert match, f"docs/{page} lost its executable {marker} example"
    return match.group(1)


def test_own_loop_example_runs(capsys):
    example = _block("own-loop.md", "docs-example-loop")
    exec(compile(example, "docs/own-loop.md", "exec"), {"__name__": "own_loop_example"})
    assert "compose(" in capsys.readouterr().out


def test_the_preset_example_composes():
    found: dict[str, object] = {"__name__": "own_loop_preset"}
    exec(compile(_block("own-loop.md", "docs-example-preset"), "docs/own-loop.md", "exec"), found)
    assert "AMP(" in repr(found["stack"])


def test_the_strategies_page_example_composes():
    found: dict[str, object] = {"__name__": "strategies_example"}
    exec(compile(_block("strategies.md", "docs-example-strategies"), "docs/strategies.md", "exec"), found)
    assert "Compile(" in repr(found["stack"])

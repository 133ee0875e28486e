"""The README's own-loop example runs as written."""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_own_loop_example_runs(capsys):
    text = README.read_text()
    match = re.search(r"<!-- readme-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert match, "README lost its executable own-loop example"
    exec(compile(match.group(1), "README.md", "exec"), {"__name__": "readme_example"})
    assert "compose(" in capsys.readouterr().out

"""benchmarks/docs_words.py counts the words of prose sentences only: code, tables and headings are no sentences,
a list item is one of its own, and "e.g." ends nothing."""
from __future__ import annotations

from benchmarks import docs_words

PAGE = """# A title that is no sentence

Run it. Then read the answer, e.g. the first line, which says what to use.

    ablate run mnist_cnn --device cpu --results results and more words than a sentence

| a | table |
|---|---|

- An item of four words.
- Another item
  over two lines.

```python
print("code is no sentence either. Not this one.")
```
"""


def test_only_prose_sentences_are_counted(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = docs_words.measure(page)
    assert found.lengths == [2, 13, 5, 5]
    assert found.mean == 6.25 and found.p90 >= 5


def test_a_missing_page_is_one_line_and_exit_2(tmp_path, capsys):
    assert docs_words.main([str(tmp_path / "none.md")]) == 2
    assert capsys.readouterr().err.count("\n") == 1

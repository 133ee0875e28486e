"""One glossary: every verdict word's sentence in docs/results.md is the one the report prints
(ablate.render.glossary), and the report ends its answer with the words it used."""
from __future__ import annotations

from pathlib import Path

from ablate.render import glossary

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def test_docs_results_defines_every_word_as_the_report_does():
    text = RESULTS.read_text()
    assert f"## {glossary.TITLE}" in text
    for word, sentence in glossary.WORDS.items():
        assert f"- **{word}**: {sentence}" in text, word


def test_a_page_defines_the_words_it_uses_and_no_other():
    said = glossary.section("parity ok; baseline not told apart from the leader; it took 3 s")
    assert said[0] == f"## {glossary.TITLE}"
    assert [line.split("**")[1] for line in said if line.startswith("- ")] == ["ok", "not told apart"]
    assert glossary.section("nothing to define here") == []

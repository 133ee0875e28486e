"""The words a verdict is said in, each defined once in a sentence a practitioner can act on.

The report closes its answer with the ones it used, as `ablate compare`'s page its rows; docs/results.md lists them
all (tests/docs/test_glossary.py holds the two to this one source).
"""
from __future__ import annotations

import re

TITLE = "What the words mean"
STUDY_WORDS: dict[str, str] = {  # a study's report and table
    "ok": "Accuracy is shown within the tolerance of the baseline's: safe to use.",
    "below": "Accuracy is shown worse than the baseline's by more than the tolerance: never recommended.",
    "uncertain": "The accuracy interval straddles the tolerance; more seeds would decide it.",
    "probably below": "Uncertain, and the estimate itself is past the tolerance: treated as below, never recommended.",
    "told apart": "The race showed which of two stacks is faster, at a known error rate.",
    "not told apart": "The race could not show which of two stacks is faster: either is a sound choice.",
    "not measured: not needed": "`--quick` only: its accuracy was not trained, as it could not change the answer.",
    "not yet": "Its accuracy trains once, after the answer; the study stopped first: run it again to fill it in.",
}
CHANGE_WORDS: dict[str, str] = {  # `ablate compare`'s page
    "moved": "`ablate compare`: the row's speed-up changed between the two studies by more than their noise.",
    "same": "`ablate compare`: the row's speed-up is shown within the margin in both studies.",
    "no change shown": "`ablate compare`: the noise is too large to show a change or sameness.",
}
WORDS = {**STUDY_WORDS, **CHANGE_WORDS}


def section(text: str, words: dict[str, str] = STUDY_WORDS) -> list[str]:
    """A page's footnote: the `words` its `text` uses, each with its sentence."""
    used = set()
    for word in sorted(words, key=len, reverse=True):  # "not told apart" is not also "told apart"
        pattern = rf"(?<![\w-]){re.escape(word)}(?![\w-])"
        if re.search(pattern, text):
            used.add(word)
            text = re.sub(pattern, " ", text)
    if not used:
        return []
    return [f"## {TITLE}", "", *(f"- **{w}**: {words[w]}" for w in words if w in used), ""]

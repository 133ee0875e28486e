"""No module of ablate or strategies names a run (repro16), a machine (the Xeon, the EPYC), an issue number or a
commit hash: a comment gives the reason in a line and points to its evidence in docs/ or benchmarks/RESULTS.md, as
ARCHITECTURE.md asks. A run's figures and history mean nothing to a reader of the code and go stale there unseen,
while the evidence pages keep them beside the measurement or simulation that made them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ablate", "strategies")
# The modules only. A study file's comments are part of its hash (`Study.file_hash`), so rewording one is left to a
# change that edits the study anyway: a stored study of it would no longer resume.
SUFFIXES = {".py"}

NAMED = [
    re.compile(r"repro\d+", re.IGNORECASE),  # a benchmark run: benchmarks/studies/repro16.yaml
    re.compile(r"\bxeon\b", re.IGNORECASE),  # the shared machines the figures were measured on
    re.compile(r"\bepyc\b", re.IGNORECASE),
    re.compile(r"\bissues? #?\d+", re.IGNORECASE),  # "issue 47", "issues 47 and 50"
]
# A commit hash as git abbreviates it: 7 to 40 lowercase hex digits standing alone. Not after "#" (a colour,
# "#1f77b4ff") and not after "0x" (a constant: no word boundary there).
HEX = re.compile(r"(?<![#\w])[0-9a-f]{7,40}(?!\w)")


def is_hash(token: str) -> bool:
    """Both a digit and a letter: all-digit numbers (1234567) and hex words (deadbeef, defaced) are not hashes."""
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def found(line: str) -> list[str]:
    """What `line` names that the code should not: runs, machines, issues, commit hashes."""
    named = [m.group() for pattern in NAMED for m in pattern.finditer(line)]
    return named + [m.group() for m in HEX.finditer(line) if is_hash(m.group())]


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*")
                  if p.suffix in SUFFIXES and p.is_file() and "__pycache__" not in p.parts)


@pytest.mark.parametrize("line, names", [
    ("at 46e5984 the store", ["46e5984"]),
    ("(1c7cf22)", ["1c7cf22"]),
    ("60dc9d9bf104c989034b4e4394b6c1c4ce24d587", ["60dc9d9bf104c989034b4e4394b6c1c4ce24d587"]),
    ("On repro16's grid", ["repro16"]),
    ("REPRO16 = ...", ["REPRO16"]),
    ("on the 2-core Xeon", ["Xeon"]),
    ("an AMD EPYC VM", ["EPYC"]),
    ("Issue 65, item 3", ["Issue 65"]),
    ("(issues 47 and 50)", ["issues 47"]),
    ("0xdeadbeef1", []),  # a hex constant
    ("color: #1f77b4ff", []),  # a colour
    ("deadbeef, cafebabe, defaced", []),  # hex words
    ("1234567 samples, 36000", []),  # numbers
    ("pytorch#145728", []),  # an upstream bug, the evidence for a workaround
    ("secrets.token_hex(4); sha256", []),
    ("the issue is the step", []),
])
def test_the_rule_finds_what_it_should_and_no_more(line: str, names: list[str]) -> None:
    assert found(line) == names


def test_the_code_names_no_run_machine_issue_or_commit() -> None:
    files = sources()
    assert any(p.suffix == ".py" for p in files)
    hits = [f"{p.relative_to(ROOT)}:{n}: {', '.join(names)}"
            for p in files for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if (names := found(line))]
    assert not hits, ("say why in a line and point to the evidence (docs/evidence.md, "
                      "or a benchmarks/RESULTS.md section), without the run, machine, issue or commit:\n"
                      + "\n".join(hits))

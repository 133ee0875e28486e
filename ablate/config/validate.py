"""A study file's problems as one line each: `StudyError` and the checks that raise it."""
from __future__ import annotations

from typing import Any

from ablate.workload.registry import unknown


class StudyError(ValueError):
    """A study cannot be loaded; the message is one line for the user."""


def mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise StudyError(f"{where}: expected a mapping, got {value!r}")
    return value


def choice(value: Any, valid: Any, where: str, what: str) -> None:
    if value not in valid:
        raise StudyError(f"{where}: {unknown(what, [value], valid)}")


def reject_unknown(given: dict, known: set[str], where: str, noun: str = "key") -> None:
    if strangers := sorted(str(k) for k in given if k not in known):
        raise StudyError(f"{where}: {unknown(noun, strangers, known, lead='valid')}")

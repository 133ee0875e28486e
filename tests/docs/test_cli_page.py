"""docs/cli.md names every `ablate` command and every option its `--help` prints, each under the command's own
heading, so a new option cannot ship undocumented."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ablate import cli

CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def _commands(capsys: pytest.CaptureFixture[str]) -> list[str]:
    found = re.search(r"\{([\w,-]+)\}", _help(capsys))
    assert found, "`ablate --help` lists no commands"
    return found.group(1).split(",")


def _section(text: str, command: str) -> str:
    """What docs/cli.md says under `## `ablate COMMAND``, up to the next heading of that level."""
    found = re.search(rf"^## `ablate {command}`\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert found, f"docs/cli.md has no section `## `ablate {command}``"
    return found.group(1)


def test_every_command_and_option_is_on_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    text = CLI_PAGE.read_text()
    missing = []
    for command in _commands(capsys):
        section = _section(text, command)
        # the options argparse lists, each at a line's start (not those a help text mentions)
        options = set(re.findall(r"^\s+(?:-\w, )?(--[a-z][\w-]*)", _help(capsys, command), re.M)) - {"--help"}
        missing += [f"{command} {option}" for option in sorted(options) if f"`{option}" not in section]
    assert not missing, f"docs/cli.md does not name: {missing}"

"""One message on stderr, as the CLI prints an error: its first line, then only the indented lines it wrapped to.

An error is one message naming the problem, wrapped at 100 columns (`ablate.render.terminal.message`): a data
error can run to 500 characters. A test that expects one message reads it back whole with `one_message`.
"""
from __future__ import annotations

LINE = 100  # ablate.render.terminal.LINE: a message's lines fit it unless one word (an address) is longer


def one_message(err: str) -> str:
    """The one message `err` holds, its wrapped lines joined; fails where it holds more than one, or a line over
    `LINE` columns that is not one word."""
    lines = [line for line in err.strip().splitlines() if line]
    assert lines, err
    assert all(len(line) <= LINE or " " not in line.strip() for line in lines), f"a line over {LINE}:\n{err}"
    joined = unwrapped("\n".join(lines))
    assert len(joined) == 1 and not joined[0][0].isspace(), f"not one message:\n{err}"
    return joined[0]


def unwrapped(text: str) -> list[str]:
    """`text`'s printed lines, each joined with the indented lines `ablate.render.terminal.wrapped` wrapped it to: a
    header line wraps or not with the machine's name (its CPU model), so a test reads it whole."""
    lines: list[str] = []
    for line in text.splitlines():
        if lines and len(line) > 2 and line.startswith("  ") and not line[2].isspace():
            lines[-1] = lines[-1].rstrip() + " " + line.strip()
        else:
            lines.append(line)
    return lines

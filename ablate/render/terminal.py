"""What a run prints while it runs, kept to the width of where it goes: a terminal's, or `LINE` columns in a log.

In a terminal a line longer than the terminal wraps, and a progress line that wraps is redrawn from its second half
at every update, leaving the first half behind each time. So the header and the trial lines are wrapped at word
boundaries, and the text after the progress bar is cut to what the terminal leaves beside a bar of `MIN_BAR`
characters.

In a log (output to a file or a pipe: CI, `ablate run ... > run.log 2>&1`) a bar redrawn with carriage returns leaves
thousands of updates in the file, and nobody reads a line of 400 characters there. So lines follow COLUMNS, or
`LINE` where it is unset, and the progress bar becomes `Logged`: its counts and what is left, written as a plain
line at most once every `LOG_EVERY_S` seconds, as the run moves on, and once at the end.
"""
from __future__ import annotations

import math
import shutil
import sys
import textwrap
from typing import Any

from tqdm import tqdm
from tqdm.utils import disp_len

LINE = 100  # the columns of a log's lines (COLUMNS unset), of an error, and of a line that names an address
MIN_BAR = 10
MAX_DOING = 120  # characters after the bar on a wide terminal
# The count done, then the study's own estimate of what is left (`left`), not a total or tqdm's remaining time: the
# protocol queues its race, parity and confirmation blocks as it goes, so the queue so far is no total, and a count
# of it beside the estimate's "~N more" reads as a contradiction. The bar fills against the estimate's high end.
BAR_FORMAT = "{n_fmt} measured |{bar}| [{elapsed}{desc}{postfix}]"
LOG_FORMAT = "{n_fmt} measured [{elapsed}{desc}{postfix}]"  # no bar: a log reads the count
LOG_EVERY_S = 60.0  # a log's progress line: a minute apart at most, a few dozen lines an hour beside the trials'


class Logged(tqdm):
    """A progress bar for a log: each update a whole line, never a carriage return, at most one every
    `mininterval` seconds (tqdm's own throttle, which its forced refreshes - a postfix, a line written above the
    bar - would bypass), and the final state once at `close`.

    tqdm's documented way to show its state elsewhere is to override `display` (its docstring); `clear` has
    nothing to clear in a log."""

    _said_at = -math.inf  # set in `display`, which tqdm's __init__ already calls

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if msg is not None:  # tqdm clearing the bar's line: a log keeps its lines
            return False
        now = self._time()
        if now - self._said_at < self.mininterval:
            return False
        self._said_at = now
        self.fp.write(f"{self}\n")
        self.fp.flush()
        return True

    def clear(self, nolock: bool = False) -> None:
        return None

    def close(self) -> None:
        if not getattr(self, "disable", True):
            self._said_at = -math.inf
            self.display()  # the final count, whenever the last line was said
            self.leave = False  # tqdm's own close would end a bar on screen with a newline
        super().close()


def live(stream: Any) -> bool:
    """Whether `stream` is a terminal (a bar redrawn in place), not a file or a pipe (a log)."""
    return bool(getattr(stream, "isatty", lambda: False)())


def progress(total: int, initial: int) -> tqdm:
    """The run's progress bar, on stderr: redrawn in place in a terminal, a plain line now and then in a log
    (`Logged`). `total`: the measurements queued so far, the bar's length until the estimate says more (`fill`).
    Skipped combinations take no time: they count in neither the count nor the estimate of what is left (`left`)."""
    if live(sys.stderr):
        return tqdm(total=total, initial=initial, unit="trial", dynamic_ncols=True, smoothing=0, bar_format=BAR_FORMAT)
    return Logged(total=total, initial=initial, unit="trial", ncols=width(), smoothing=0, bar_format=LOG_FORMAT,
                  mininterval=LOG_EVERY_S)


def show(bar: tqdm, doing: str) -> None:
    """`doing` after the bar, cut to fit the bar's width (a terminal's, or a log's `LINE`)."""
    state = bar.format_dict
    if ncols := state.get("ncols"):
        shape = state.get("bar_format") or BAR_FORMAT
        without = tqdm.format_meter(**{**state, "ncols": None, "postfix": None,
                                       "bar_format": shape.replace("|{bar}|", "||")})
        # A bar's `MIN_BAR` columns; in a log, where no bar absorbs it, room for the times to grow ("?" -> "01:05").
        room = ncols - disp_len(without) - MIN_BAR - len(", ")
        doing = doing if len(doing) <= room else doing[:room - 3] + "..." if room > 12 else ""
    bar.set_postfix_str(doing[:MAX_DOING], refresh=True)


def fill(bar: tqdm, queued: int, more: int) -> None:
    """The bar's length: the measurements done and the most the estimate says are left (`more`), or those queued so far
    where it says none yet. Against the high end the bar never runs ahead of the study."""
    bar.total = max(queued, bar.n + more)


def finished(bar: tqdm) -> None:
    """The study's last measurement in: the bar full, nothing said left or running. The estimate's high end can still
    allow for a race round the last result made needless, and the line ends with the count alone."""
    bar.total = bar.n
    left(bar, "", refresh=False)
    bar.set_postfix_str("", refresh=False)


def left(bar: tqdm, text: str, refresh: bool = True) -> None:
    """What is left of the study (`ablate.run.estimate.Left.short`), after the elapsed time: the bar's description,
    which the formats place there."""
    bar.set_description_str(f", {text}" if text else "", refresh=refresh)


def width(default: int = LINE) -> int:
    """The columns a line may take: one short of the terminal's width (a line of exactly the width leaves the
    cursor past the edge on some terminals), COLUMNS's where it is set; `default` where neither is known (a log)."""
    columns = shutil.get_terminal_size((0, 0)).columns
    return columns - 1 if columns else default


def _fill(text: str, columns: int, indent: str = "  ") -> str:
    return textwrap.fill(text, width=max(columns, 40), subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def wrapped(text: str) -> str:
    """`text` wrapped at word boundaries to the width `width` gives, the lines after the first indented. A word
    longer than a line (an address) stays whole."""
    return _fill(text, width())


def message(text: str, indent: str = "  ") -> str:
    """An error or a warning, wrapped as `wrapped` does, at `LINE` columns at most even in a wider terminal: a
    message is read, not scanned, and reads best short. `indent` starts the lines after the first (deeper than
    the lines that follow it where those are indented too)."""
    return _fill(text, min(LINE, width()), indent)


def addressed(label: str, address: object) -> str:
    """`label: address` on one line where it fits `LINE` columns, else the address alone on the next line,
    indented, so that a terminal copies it whole."""
    one = f"{label}: {address}"
    return one if len(one) <= LINE else f"{label}:\n  {address}"

"""What a run prints while it runs, kept to the terminal's width.

A line longer than the terminal wraps, and a progress line that wraps is
redrawn from its second half at every update, leaving the first half behind
each time. So the header is wrapped at word boundaries, and the text after
the progress bar is cut to what the terminal leaves beside a bar of
`MIN_BAR` characters. Where the width is unknown (not a terminal, no
COLUMNS), nothing is cut.
"""
from __future__ import annotations

import shutil
import textwrap

from tqdm import tqdm
from tqdm.utils import disp_len

MIN_BAR = 10
MAX_DOING = 120  # characters after the bar on a wide terminal
BAR_FORMAT = "{n_fmt}/{total_fmt} measured |{bar}| [{elapsed}<{remaining}{postfix}]"


def progress(total: int, initial: int) -> tqdm:
    """The run's progress bar. Skipped combinations take no time: they count neither in the total nor in the rate,
    so the ETA is the remaining measurements at the average measured duration so far (smoothing=0)."""
    return tqdm(total=total, initial=initial, unit="trial", dynamic_ncols=True, smoothing=0, bar_format=BAR_FORMAT)


def show(bar: tqdm, doing: str) -> None:
    """`doing` after the bar, cut to fit the terminal's width."""
    state = bar.format_dict
    if ncols := state.get("ncols"):
        without = tqdm.format_meter(**{**state, "ncols": None, "postfix": None,
                                       "bar_format": BAR_FORMAT.replace("|{bar}|", "||")})
        room = ncols - disp_len(without) - MIN_BAR - len(", ")
        doing = doing if len(doing) <= room else doing[:room - 3] + "..." if room > 12 else ""
    bar.set_postfix_str(doing[:MAX_DOING], refresh=True)


def width(default: int) -> int:
    """The columns a line may take: one short of the terminal's width (a line of exactly the width leaves the
    cursor past the edge on some terminals); `default` where the width is unknown."""
    columns = shutil.get_terminal_size((0, 0)).columns
    return columns - 1 if columns else default


def wrapped(text: str) -> str:
    """`text` wrapped at word boundaries to the terminal's width (COLUMNS where set), the lines after the first
    indented; as it is where the width is unknown (a pipe, a file: a reader there wants whole lines)."""
    if not (columns := width(default=0)):
        return text
    return textwrap.fill(text, width=max(columns, 40), subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


LINE = 100  # the columns a line that names a path or an address may take before the address gets a line of its own


def addressed(label: str, address: object) -> str:
    """`label: address` on one line where it fits `LINE` columns, else the address alone on the next line,
    indented, so that a terminal copies it whole."""
    one = f"{label}: {address}"
    return one if len(one) <= LINE else f"{label}:\n  {address}"

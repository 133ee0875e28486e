"""The run's header and progress line keep to the terminal's width: a wrapped progress line leaves half of
itself behind at every update."""
from __future__ import annotations

import io
import os
import re

import pytest
from tqdm.utils import disp_len

from ablate.render import terminal

DOING = "block 3: num_workers(n=2) + batch_size(n=128) + set_to_none + amp(dtype=bf16) + compile · timed window 2 of 3"


def _lines(stream: io.StringIO) -> list[str]:
    """Every state the progress line was drawn in (tqdm redraws with a carriage return)."""
    return [line for line in re.split(r"[\r\n]", stream.getvalue()) if line.strip()]


@pytest.mark.parametrize("columns", [80, 100])
def test_the_progress_line_fits_the_terminal_and_keeps_what_it_can_of_the_phase(columns):
    stream = io.StringIO()
    bar = terminal.tqdm(total=214, initial=7, file=stream, ncols=columns, bar_format=terminal.BAR_FORMAT)
    for doing in (DOING, "block 0: baseline · loading data", DOING * 3):
        terminal.show(bar, doing)
    bar.close()
    drawn = _lines(stream)
    assert drawn and all(disp_len(line) <= columns for line in drawn), [disp_len(line) for line in drawn]
    assert any("block 0: baseline · loading data" in line for line in drawn)  # a short phase is shown whole
    assert any("block 3: num_workers(n=2)" in line and "..." in line for line in drawn)  # a long one is cut
    assert all(re.search(r"\|[^|]{%d,}\|" % terminal.MIN_BAR, line) for line in drawn)  # the bar stays


def test_without_a_known_width_nothing_is_cut():
    stream = io.StringIO()
    bar = terminal.tqdm(total=10, file=stream, ncols=None, bar_format=terminal.BAR_FORMAT)
    terminal.show(bar, DOING)
    bar.close()
    assert DOING in stream.getvalue()


@pytest.mark.parametrize("columns", [80, 100])
def test_the_header_wraps_at_words_to_the_terminal(columns, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    header = ("mnist_cnn: 96 combinations (grid) on cpu (Intel(R) Xeon(R) Processor @ 2.80GHz), torch 2.15.0; "
              "protocol: screening in blocks of 8 combinations plus 2 baseline measurements, in a random order per "
              "block; then racing of up to 6 contenders in at most 6 blocks")
    lines = terminal.wrapped(header).splitlines()
    assert len(lines) > 1 and all(len(line) < columns for line in lines)
    assert " ".join(line.strip() for line in lines) == header


def test_where_the_width_is_unknown_lines_stay_whole(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(terminal.shutil, "get_terminal_size", lambda fallback: os.terminal_size(fallback))
    text = "word " * 60
    assert terminal.wrapped(text) == text


def test_an_address_that_would_pass_100_columns_gets_a_line_of_its_own():
    short = terminal.addressed("results table", "/tmp/r/tiny/grid-cpu.csv")
    assert short == "results table: /tmp/r/tiny/grid-cpu.csv"
    deep = "/home/someone/projects/a-long-name/results/" + "x" * 60 + "/grid-cpu.csv"
    lines = terminal.addressed("results table", deep).splitlines()
    assert lines == ["results table:", f"  {deep}"]  # whole, so that it copies whole

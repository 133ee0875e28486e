"""The run's header and progress line keep to the terminal's width: a wrapped progress line leaves half of
itself behind at every update. In a log (a file, a pipe) lines keep to 100 columns and the progress bar is a plain
line now and then, never a carriage return."""
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


def test_where_the_width_is_unknown_a_log_gets_lines_of_100_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(terminal.shutil, "get_terminal_size", lambda fallback: os.terminal_size(fallback))
    text = "word " * 60 + "/a/path/that/is/longer/than/a/line/" + "x" * 120
    lines = terminal.wrapped(text).splitlines()
    assert len(lines) > 1 and all(len(line) <= terminal.LINE for line in lines[:-1])
    assert lines[-1].strip().startswith("/a/path/")  # an address is never cut: it stays one word, on its own line


def test_an_error_wraps_at_100_columns_even_in_a_wider_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    text = "ablate: error: " + "the data is not where it was looked for " * 10
    lines = terminal.message(text).splitlines()
    assert len(lines) > 1 and all(len(line) <= terminal.LINE for line in lines)
    assert all(line.startswith("  ") for line in lines[1:])  # one message: the lines after the first indented


def _logged(clock: list[float], monkeypatch) -> tuple[io.StringIO, terminal.Logged]:
    """A log's progress bar on a clock the test moves (tqdm reads `tqdm.std.time`)."""
    monkeypatch.setattr("tqdm.std.time", lambda: clock[0])
    stream = io.StringIO()
    return stream, terminal.Logged(total=20, initial=2, file=stream, ncols=terminal.LINE,
                                   bar_format=terminal.LOG_FORMAT, mininterval=terminal.LOG_EVERY_S, smoothing=0)


def test_a_logs_progress_is_a_plain_line_at_most_once_a_minute_and_once_at_the_end(monkeypatch):
    clock = [0.0]
    stream, bar = _logged(clock, monkeypatch)
    for second in range(0, 300, 5):  # five minutes of phases, measurements and lines written above the bar
        clock[0] = float(second)
        terminal.show(bar, DOING if second % 2 else f"block {second}: baseline · loading data")
        if second % 30 == 0:
            bar.update(1)
            terminal.tqdm.write(f"trial line at {second} s", file=stream)
    bar.close()
    text = stream.getvalue()
    assert "\r" not in text and all(len(line) <= terminal.LINE for line in text.splitlines())
    said = [line for line in text.splitlines() if " measured [" in line]
    assert said[0].startswith("2 measured [00:00") and said[-1].startswith("12 measured [04:55")
    # at the start, then once each minute (each at the first update past it), then the final count
    assert len(said) == 1 + 4 + 1, said
    assert sum(line.startswith("trial line at ") for line in text.splitlines()) == 10  # each line above, whole
    assert any("..." in line for line in said)  # a long phase cut to fit


def test_the_line_says_the_count_done_and_what_is_left_never_the_queue_as_a_total(monkeypatch):
    """The protocol queues its race and parity as it goes: "done/queued measured, ~N more" contradicted itself. The line
    says the count and the estimate; the bar fills against the estimate's high end, or the queue where it is longer."""
    stream, bar = _logged([0.0], monkeypatch)
    bar.update(-1)  # 1 done of the 20 queued
    terminal.fill(bar, queued=20, more=166)
    terminal.left(bar, "~72-166 more")
    assert bar.total == 167 and str(bar).startswith("1 measured [00:00, ~72-166 more")
    assert "/" not in str(bar).split("[")[0]
    terminal.fill(bar, queued=20, more=5)  # the estimate's high end short of the queue: the queue is the length
    assert bar.total == 20
    bar.close()


def test_the_last_line_says_the_count_alone_though_the_estimate_still_allowed_more(monkeypatch):
    """The estimate's high end can allow for a race round the last result made needless: "~0-4 more" must not be
    the line a finished study ends on."""
    stream, bar = _logged([0.0], monkeypatch)
    terminal.left(bar, "~0-4 more (under 1 min)")
    terminal.show(bar, "block 3: amp(bf16) · finishing")
    terminal.finished(bar)
    bar.close()
    last = [line for line in stream.getvalue().splitlines() if " measured [" in line][-1]
    assert re.fullmatch(r"\d+ measured \[00:00\]", last), last
    assert bar.total == bar.n


@pytest.mark.parametrize("terminal_there, kind", [(True, "tqdm"), (False, "Logged")])
def test_the_bar_is_redrawn_in_a_terminal_and_a_plain_line_in_a_log(terminal_there, kind, monkeypatch):
    class Stderr(io.StringIO):
        def isatty(self) -> bool:
            return terminal_there

    monkeypatch.setattr(terminal.sys, "stderr", Stderr())
    bar = terminal.progress(3, 0)
    bar.close()
    assert type(bar).__name__ == kind
    assert ("\r" in terminal.sys.stderr.getvalue()) == terminal_there


def test_an_address_that_would_pass_100_columns_gets_a_line_of_its_own():
    short = terminal.addressed("results table", "/tmp/r/tiny/grid-cpu.csv")
    assert short == "results table: /tmp/r/tiny/grid-cpu.csv"
    deep = "/home/someone/projects/a-long-name/results/" + "x" * 60 + "/grid-cpu.csv"
    lines = terminal.addressed("results table", deep).splitlines()
    assert lines == ["results table:", f"  {deep}"]  # whole, so that it copies whole

"""The files a reader opens whole (report, summary.json, the results CSV, a change's page) are replaced whole: a
failure while one is written - its serialisation raising, a full disk - leaves the previous file as it was and no
temporary file beside it; a write that succeeds gives the bytes a plain write gave."""
from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import pytest
from tmpfs import mounted

from ablate.render import results
from ablate.store.files import replaced

TEXT = "# report\n\nbaseline x1.00 [0.97, 1.03]; Δ acc +0.12 points\n"
TABLE = [{"trial": 0, "combination": "baseline", "state": "complete", "reason": ""},
         {"trial": 1, "combination": "amp(dtype=bf16)", "state": "failed", "reason": 'error: "quoted", two,\nlines'}]


def test_a_write_gives_the_bytes_and_mode_a_plain_write_gave(tmp_path):
    plain, whole = tmp_path / "plain.md", tmp_path / "whole.md"
    plain.write_text(TEXT)
    with replaced(whole) as file:
        file.write(TEXT)
    assert whole.read_bytes() == plain.read_bytes()
    assert whole.stat().st_mode == plain.stat().st_mode  # the umask's mode, not a temporary file's 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.md", "whole.md"]


def test_the_results_csv_is_the_table_a_plain_write_gave(tmp_path, monkeypatch):
    """Its rows end in \\r\\n (csv's own line ends, which `newline=""` keeps) and quote what needs quoting."""
    whole = tmp_path / "whole" / "grid-cpu.csv"
    results.write_csv(TABLE, whole)

    @contextlib.contextmanager
    def plain(path: Path, newline: str | None = None):  # the write the CSV had before: open, write, close
        with path.open("w", newline=newline) as file:
            yield file

    monkeypatch.setattr(results, "replaced", plain)
    results.write_csv(TABLE, written := tmp_path / "plain" / "grid-cpu.csv")
    assert whole.read_bytes() == written.read_bytes() and b"\r\n" in whole.read_bytes()


def test_a_table_that_fails_mid_write_leaves_the_previous_one_whole(tmp_path):
    path = tmp_path / "grid-cpu.csv"
    results.write_csv(TABLE[:1], path)
    before = path.read_bytes()
    bad = [*TABLE, {"trial": 2, "no such column": 1}]  # csv.DictWriter raises at this row, two rows in
    with pytest.raises(ValueError, match="no such column"):
        results.write_csv(bad, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["grid-cpu.csv"]


def test_a_serialisation_that_raises_leaves_the_previous_file_whole(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text('{"old": true}\n')

    def pieces():
        yield '{"new": '
        raise TypeError("Object of type Interval is not JSON serializable")

    with pytest.raises(TypeError), replaced(path) as file:
        for piece in pieces():
            file.write(piece)
    assert path.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_disk_that_fills_mid_write_leaves_the_previous_file_whole(tmp_path):
    """On a real disk of 256 KiB: the new report, a MiB, cannot fit; the old one is still there, whole."""
    with mounted(tmp_path / "disk", 256 * 1024) as disk:
        path = disk / "report.html"
        path.write_text(TEXT)
        with pytest.raises(OSError) as raised, replaced(path) as file:
            file.write("x" * (1 << 20))
        assert raised.value.errno == errno.ENOSPC
        assert path.read_text() == TEXT
        assert os.listdir(disk) == ["report.html"]

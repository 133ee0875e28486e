"""A download never hangs a trial: a network that accepts and then says nothing is given up on, and ABLATE_OFFLINE
skips the attempt. The silent server stands in for a machine whose outbound packets are dropped (a lent GPU
machine reaches nothing outside it), where torchvision's own download has no timeout."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOAD = ("import sys, time; from ablate.workload import data; data.DOWNLOAD_TIMEOUT_S = 1; began = time.monotonic(); "
        "splits = data.load('cifar10'); print(round(time.monotonic() - began, 1)); print(splits.throughput_only)")


@pytest.fixture
def silent_proxy():
    """A TCP server that accepts every connection and never answers; yields (url, connections seen)."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                seen.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", seen
    server.close()
    for connection in seen:
        connection.close()


def _load(tmp_path: Path, proxy: str, **env: str) -> subprocess.CompletedProcess:
    environment = {"PATH": "/usr/bin:/bin", "ABLATE_DATA_DIR": str(tmp_path), "http_proxy": proxy,
                   "https_proxy": proxy, "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-c", LOAD], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=120)  # without a time limit on the download this would hang: the test fails here


@pytest.mark.slow
def test_a_download_that_gets_no_answer_gives_up_and_the_stand_in_is_used(tmp_path, silent_proxy):
    proxy, seen = silent_proxy
    done = _load(tmp_path, proxy)
    assert done.returncode == 0, done.stderr
    seconds, note = done.stdout.splitlines()
    assert seen and float(seconds) < 60
    assert "could not be downloaded" in note and "timed out" in note and "throughput only" in note


def test_offline_makes_no_attempt(tmp_path, silent_proxy):
    proxy, seen = silent_proxy
    done = _load(tmp_path, proxy, ABLATE_OFFLINE="1")
    assert done.returncode == 0, done.stderr
    assert not seen and "throughput only" in done.stdout

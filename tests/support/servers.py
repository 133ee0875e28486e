"""Real servers for the tests that spread a study: a PostgreSQL database on loopback, an MLflow tracking server.

PostgreSQL is found, never faked: ABLATE_TEST_POSTGRES (a URL of a role that may create databases), else the
role `.ci/run` creates (postgresql://ablate:ablate@127.0.0.1:5432/ablate). Each test gets a fresh database.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator

import pytest

DEFAULT_POSTGRES = "postgresql://ablate:ablate@127.0.0.1:5432/ablate"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _fresh_database() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped afterwards; skips, saying why, without a server."""
    try:
        import psycopg  # SQLAlchemy's default driver for postgresql:// URLs
    except ImportError:
        pytest.skip("PostgreSQL tests skipped: psycopg is not installed (pip install 'psycopg[binary]')")
    url = os.environ.get("ABLATE_TEST_POSTGRES", DEFAULT_POSTGRES)
    try:
        admin = psycopg.connect(url, connect_timeout=5, autocommit=True)
    except psycopg.OperationalError as error:
        pytest.skip(f"PostgreSQL tests skipped: no server at {url} ({' '.join(str(error).split())}); "
                    "`.ci/run` installs and starts one, or set ABLATE_TEST_POSTGRES")
    name = f"ablate_test_{uuid.uuid4().hex[:12]}"
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    try:
        yield url.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


@pytest.fixture
def postgres() -> Iterator[str]:
    """A fresh PostgreSQL database for the Optuna storage."""
    with _fresh_database() as url:
        yield url


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    """A real `mlflow server` on 127.0.0.1, as docs/spread.md starts one: its own PostgreSQL database as the
    backend store, artifacts proxied by the server. Its http:// URI."""
    port = free_port()
    with _fresh_database() as backend, serving([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
                                                "--port", str(port), "--backend-store-uri", backend,
                                                "--artifacts-destination", str(tmp_path / "mlflow-artifacts"),
                                                "--workers", "1"], port, tmp_path / "mlflow-server.log") as uri:
        yield uri


@contextlib.contextmanager
def serving(command: list[str], port: int, log_path: Path) -> Iterator[str]:
    """Start `command` (an MLflow UI or tracking server listening on `port`), wait until it answers /health,
    yield its http:// URI, and kill it (its whole session) afterwards.

    Without MLflow's job execution (a job runner and seven huey consumers beside the server, each importing MLflow:
    tens of seconds of CPU on 2 cores, then polling): tracking and the UI, all the tests use, do not need it."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log_path.open("w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        uri = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(f"{uri}/health", timeout=2)
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"{' '.join(command[:4])} did not start: {log_path.read_text()[-2000:]}")
                    time.sleep(0.5)
            yield uri
        finally:
            os.killpg(server.pid, 9)
            server.wait()

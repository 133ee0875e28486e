"""The outages the benchmark causes: an MLflow tracking server stopped and started again on its port and store, a
PostgreSQL cluster stopped and started (`pg_ctlcluster`), a results folder on a tmpfs filled to the last byte and
then enlarged (`mount -o remount,size=`). The last two need root."""
from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

DEFAULT_POSTGRES = "postgresql://ablate:ablate@127.0.0.1:5432/ablate"  # the role `.ci/run` creates


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowServer:
    """`mlflow server` on 127.0.0.1:`port` over an SQLite backend store in `folder`, as docs/spread.md starts
    one (without MLflow's job runner, which a tracking server does not need)."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.folder, self.port = folder, port or free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.uri = f"http://127.0.0.1:{self.port}"
        self.backend = f"sqlite:///{(folder / 'mlflow-server.db').resolve()}"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, wait_s: float = 180) -> float:
        """Started, and answering /health: the seconds that took."""
        self.starts += 1
        began = time.monotonic()
        with (self.folder / f"server-{self.starts}.log").open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
                 "--backend-store-uri", self.backend, "--artifacts-destination", str(self.folder / "artifacts"),
                 "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        while time.monotonic() - began < wait_s:
            if self.answers():
                return time.monotonic() - began
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"mlflow server did not start on {self.uri}: see {self.folder}/server-{self.starts}.log")

    def answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.uri}/health", timeout=2)
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """Gone at once, its whole process group, as a crashed or rebooted server is."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None


class Postgres:
    """A fresh database on the PostgreSQL server at `url` (a role that may create databases), and the cluster's
    `pg_ctlcluster` controls. Started here if it was down (and stopped again by `close`)."""

    def __init__(self, url: str = DEFAULT_POSTGRES) -> None:
        self.admin_url, self.cluster = url, _cluster()
        self.started_here = False
        self.url: str | None = None

    def open(self) -> str | None:
        """The URL of a new database, or None and why not (`self.why`)."""
        try:
            import psycopg
        except ImportError:
            self.why = "psycopg is not installed (pip install 'psycopg[binary]')"
            return None
        if not self._answers() and self.cluster and os.geteuid() == 0:
            self.ctl("start")
            self.started_here = True
        try:
            with psycopg.connect(self.admin_url, connect_timeout=5, autocommit=True) as admin:
                name = f"ablate_chaos_{secrets.token_hex(6)}"
                admin.execute(f"CREATE DATABASE {name}")
        except psycopg.Error as error:
            self.why = f"no server at {self.admin_url} ({' '.join(str(error).split())[:160]})"
            return None
        self.url = self.admin_url.rsplit("/", 1)[0] + "/" + name
        return self.url

    def _answers(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.admin_url, connect_timeout=3).close()
            return True
        except psycopg.Error:
            return False

    def ctl(self, action: str) -> str:
        """`pg_ctlcluster VERSION NAME action`; what it said."""
        if not self.cluster:
            raise RuntimeError("no PostgreSQL cluster found by pg_lsclusters")
        done = subprocess.run(["pg_ctlcluster", *self.cluster, action], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctlcluster {' '.join(self.cluster)} {action}: {done.stderr.strip()}")
        return done.stdout.strip()

    def close(self) -> None:
        """The database dropped; the cluster stopped again where it was started here."""
        import psycopg

        with contextlib.suppress(psycopg.Error, RuntimeError):
            if self.url:
                if not self._answers() and self.cluster:
                    self.ctl("start")
                with psycopg.connect(self.admin_url, connect_timeout=5, autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE IF EXISTS {self.url.rsplit('/', 1)[1]} WITH (FORCE)")
            if self.started_here:
                self.ctl("stop")


def _cluster() -> tuple[str, str] | None:
    """(version, name) of the first cluster `pg_lsclusters` lists."""
    try:
        done = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    fields = done.stdout.split()
    return (fields[0], fields[1]) if done.returncode == 0 and len(fields) >= 2 else None


@contextlib.contextmanager
def tmpfs(folder: Path, size_mb: int) -> Iterator[Path]:
    """A tmpfs of `size_mb` MiB mounted on `folder` (created), unmounted afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def enlarge(folder: Path, size_mb: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_mb}m", str(folder)], check=True)


def fill(folder: Path) -> int:
    """Every free byte of `folder`'s filesystem taken by one file (`folder`/filler); how many bytes it took."""
    written = 0
    chunk = b"\0" * (1 << 20)
    with (folder / "filler").open("wb", buffering=0) as file:
        while True:
            try:
                written += file.write(chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return written
                chunk = chunk[:len(chunk) // 2]


def free_bytes(folder: Path) -> int:
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize

"""`ablate run` as a user runs it, in a process group of its own, cut off from outside or at a fixed point inside
(`benchmarks.chaos.kill_at`), and run again, the same command, until it exits 0."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.chaos.kill_at import FIRED_ENV

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Ran:
    """One command, as it ended."""

    label: str
    code: int
    output: str
    seconds: float
    fired: str | None = None  # the kill point's line, where `kill_at` killed it

    @property
    def killed(self) -> bool:
        return self.code == -signal.SIGKILL

    def lines(self) -> list[str]:
        """What a terminal shows at the end: the progress bar's carriage returns resolved, blank lines dropped."""
        return [line.rsplit("\r", 1)[-1].rstrip() for line in self.output.splitlines()
                if line.rsplit("\r", 1)[-1].strip()]

    def tail(self, n: int = 4) -> list[str]:
        return self.lines()[-n:]

    def about(self, *words: str, most: int = 8) -> list[str]:
        """Its lines naming any of `words` (any case), each with the lines that continue it, and of a traceback its
        first line and the exception it ends with: what it said of a fault."""
        lines, found, frames = self.lines(), [], False
        for i, line in enumerate(lines):
            if line.startswith("Traceback"):
                frames = True
                found.append(line)
            elif frames and line[:1].isspace():
                continue
            elif frames:
                frames = line.startswith(("The above exception", "During handling"))
                if not frames:
                    found.append(line[:200])
            elif not line.startswith("  ") and any(w.lower() in line.lower() for w in words):
                found.append(line)
                for more in lines[i + 1:i + 4]:
                    if not more.startswith("  "):
                        break
                    found.append(more)
        return list(dict.fromkeys(found))[:most]

    def said(self, n: int = 4) -> list[str]:
        """Its exit status and last lines, for a report."""
        status = "killed (SIGKILL)" if self.killed else f"exit status {self.code}"
        head = f"{self.label}: {status} after {self.seconds:.1f} s" + (f"; fired {self.fired}" if self.fired else "")
        return [head, *(f"    | {line[:160]}" for line in self.tail(n))]


class Running:
    def __init__(self, label: str, command: list[str], env: dict[str, str], log: Path, fired: Path | None) -> None:
        self.label, self.log, self.fired_file = label, log, fired
        self.began = time.monotonic()
        with log.open("w") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL to its whole process group: the study and its trial interpreters at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float | None = None) -> Ran:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.wait()
            self.label += f" (still running after {timeout:.0f} s: killed by the harness)"
        seconds = time.monotonic() - self.began
        _gone(self.process.pid)
        fired = None
        if self.fired_file and self.fired_file.exists():
            fired = self.fired_file.read_text().strip() or None
            self.fired_file.unlink()
        return Ran(self.label, code, self.log.read_text(errors="replace"), seconds, fired)


def _gone(group: int, wait_s: float = 15) -> None:
    """Until no process of `group` is left (a killed group's members die within moments), then SIGKILL any."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


class Ablate:
    """One `ablate` command line (`args`), run again and again in `workdir` (its logs) with `env` added."""

    def __init__(self, args: list[str], workdir: Path, env: dict[str, str] | None = None,
                 python_path: tuple[Path, ...] = ()) -> None:
        self.args, self.workdir = args, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        path = os.pathsep.join([str(ROOT), *map(str, python_path), *filter(None, [os.environ.get("PYTHONPATH")])])
        self.env = {**os.environ, "PYTHONPATH": path, **(env or {})}
        self.count = 0

    def start(self, point: str | None = None, n: int = 1, env: dict[str, str] | None = None) -> Running:
        """The command, plain or killed at `point` (`kill_at`) its `n`-th time."""
        self.count += 1
        label = f"run {self.count}" + (f" (kill at {point} {n})" if point else "")
        fired = self.workdir / f"fired-{self.count}" if point else None
        command = ([sys.executable, "-m", "benchmarks.chaos.kill_at", point, str(n), "--", *self.args] if point
                   else [sys.executable, "-m", "ablate", *self.args])
        extra = {FIRED_ENV: str(fired)} if fired else {}
        return Running(label, command, {**self.env, **extra, **(env or {})},
                       self.workdir / f"run-{self.count}.log", fired)

    def run(self, point: str | None = None, n: int = 1, timeout: float | None = None) -> Ran:
        return self.start(point, n).wait(timeout)

    def until_done(self, tries: int = 5, timeout: float | None = None) -> list[Ran]:
        """The same command again until it exits 0 (at most `tries` times)."""
        ran: list[Ran] = []
        while len(ran) < tries and (not ran or ran[-1].code != 0):
            ran.append(self.run(timeout=timeout))
        return ran

    def sync(self, timeout: float | None = 600) -> Ran:
        """`ablate sync` of the same study, storage and results."""
        self.count += 1
        args = ["sync", *[a for a in self.args[1:] if a not in ("--full-table",)]]
        return Running(f"ablate sync ({self.count})", [sys.executable, "-m", "ablate", *args], self.env,
                       self.workdir / f"sync-{self.count}.log", None).wait(timeout)


def measured(output: str) -> int:
    """How many measurements the progress bar last said were done ("12 measured")."""
    found = re.findall(r"(\d+) measured \[", output)
    return int(found[-1]) if found else 0

"""What `make gpu` runs and for how long: the steps (from the ledger) and the arithmetic of a 15-minute lease.

A lent GPU machine gives a session 15 minutes of device time in all (`LEASE_S`): the machine's start (a minute or
more), every idle wait and transfer count, a command is stopped at 10 minutes (`COMMAND_S`), and no machine starts
with under 4 minutes left (`NO_START_UNDER_S`). Two commands with a start between them do not fit, so a lease is ONE
command, and what a lease leaves for the next is in the ledger (benchmarks/gpu/ledger.yaml), not in a second part.

The arithmetic of a lease (`python -m benchmarks.gpu --dry-run` prints it with the figures):
- The machine's start, budgeted at `START_PLANNED_S` (90-120 s were seen).
- One command that ends by `COMMAND_END_S` (540 s) by bash's SECONDS, which counts from the command's start, so the
  install, unpack and import check (`SETUP_PLANNED_S` on a fresh machine) come out of it: the device command passes
  `--budget-s $((540 - SECONDS))`. Of that budget, `END_RESERVE_S` is kept for the last summary and tarball; the rest
  (`PLANNED_STEPS_S` at the planned set-up) holds the steps the ledger's plan picks, each planned at most about 3
  minutes (ledger.MAX_PLANNED_S), so a stopped command still lands its finished steps.
- The transfer back (`TRANSFER_PLANNED_S`), and what is left (`LEFT_S`): enough to rerun one short step at once on the
  warm machine (a later start is refused under 4 minutes left), not a second command of steps.
- A step's limit is its share of the steps' budget, in proportion to its estimate, and bounds it whole: it is stopped
  (SIGTERM, then SIGKILL after `STOP_GRACE_S`) at its limit less its stop reserve (`stop_reserve`: the grace, and for
  a study `REPORT_RESERVE_S` more, to rebuild its report from what finished); time a step leaves goes to the next.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.gpu.ledger import LedgerStep, load

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LEASE_S = 900  # a session's device time: start, commands, idle waits and transfers together
NO_START_UNDER_S = 240  # no machine starts with under 4 minutes left
START_PLANNED_S = 120  # the machine's start (90-120 s seen)
COMMAND_S = 600  # a lent machine stops a command at 10 minutes
COMMAND_END_S = 540  # by bash's SECONDS: the command ends by then, with a minute to spare
SETUP_PLANNED_S = 60  # install, unpack and import check on a fresh machine (est. 30-70 s)
END_RESERVE_S = 10  # of the command's budget: the last summary.md and tarball, after the last step
TRANSFER_PLANNED_S = 30  # the tarball and summary back to this machine
STOP_GRACE_S = 20  # SIGTERM, then this long for the step to record what finished, then SIGKILL
REPORT_RESERVE_S = 30  # after a study was stopped: to rebuild its report from what it finished
MIN_STEP_S = 15  # a step that would have less than this before its SIGTERM is not started
PLANNED_STEPS_S = COMMAND_END_S - SETUP_PLANNED_S - END_RESERVE_S  # the steps' budget at the planned set-up
LEFT_S = LEASE_S - START_PLANNED_S - COMMAND_END_S - TRANSFER_PLANNED_S
WARM_SETUP_S = 10  # the import check on a warm machine, which installs nothing again
# A rerun on the warm machine: its command, set-up and transfer within what is left, a minute kept in hand.
RERUN_STEP_S = LEFT_S - TRANSFER_PLANNED_S - WARM_SETUP_S - END_RESERVE_S - 60


@dataclass(frozen=True)
class Step:
    name: str
    limit_s: float  # its planned share of a command's steps (ledger: planned_s)
    what: str
    command_kind: str = "study"  # pytest, bench, study or repro (ledger: command)
    study: str | None = None  # a study file, relative to ROOT
    ablate_args: tuple[str, ...] = ()

    @classmethod
    def of(cls, step: LedgerStep) -> Step:
        return cls(step.name, step.planned_s, step.what, step.command, step.study, tuple(step.args))

    @property
    def rebuilds_report(self) -> bool:
        """Whether a stop leaves a report to rebuild (an `ablate run` study)."""
        return self.command_kind == "study"

    def command(self, scratch: Path) -> list[str]:
        py, results = sys.executable, str(self.results(scratch))
        if self.command_kind == "pytest":
            return [py, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests"]
        if self.command_kind == "bench":
            return [py, "-m", "benchmarks", "--device", "cuda", "--no-grid", *self.ablate_args, "--results", results,
                    "--output", str(self.results(scratch) / "RESULTS.md")]
        assert self.study is not None
        study = str(ROOT / self.study)
        if self.command_kind == "repro":
            return [py, "-m", "benchmarks.reproducibility", "--study", study, "--device", "cuda", "--results", results]
        return [py, "-m", "ablate", "run", study, "--device", "cuda", "--results", results, *self.ablate_args]

    def report_command(self, scratch: Path) -> list[str]:
        """Rebuilds the report from what a stopped study finished."""
        search = "optuna" if "optuna" in self.ablate_args else "grid"
        return [sys.executable, "-m", "ablate", "report", str(ROOT / str(self.study)), "--device", "cuda", "--search",
                search, "--results", str(self.results(scratch))]

    def results(self, scratch: Path) -> Path:
        return scratch / "results" / self.name


def ledger_steps() -> dict[str, Step]:
    return {s.name: Step.of(s) for s in load()}


STEPS = ledger_steps()


def limits(names: list[str], steps_s: float, steps: dict[str, Step] | None = None,
           estimates: dict[str, float] | None = None) -> dict[str, float]:
    """Each step's time limit: `steps_s` shared among the named steps in proportion to their estimates (default:
    their planned shares)."""
    steps = STEPS if steps is None else steps
    weight = {n: (estimates or {}).get(n, steps[n].limit_s) for n in names}
    scale = steps_s / sum(weight.values())
    return {n: weight[n] * scale for n in names}


def stop_reserve(step: Step, grace_s: float = STOP_GRACE_S, report_s: float = REPORT_RESERVE_S) -> float:
    """What a step's limit keeps after its SIGTERM: the grace before SIGKILL, and a study's report rebuild."""
    return grace_s + (report_s if step.rebuilds_report else 0)

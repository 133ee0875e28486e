"""The plan of one 15-minute lease, as `python -m benchmarks.gpu --dry-run` prints it: the device time, the steps the
ledger picks for the command, what is left after it, and the commands to give the lent machine."""
from __future__ import annotations

from typing import Callable

from benchmarks.gpu import ledger
from benchmarks.gpu.steps import (
    COMMAND_END_S,
    COMMAND_S,
    END_RESERVE_S,
    LEASE_S,
    LEFT_S,
    MIN_STEP_S,
    NO_START_UNDER_S,
    PLANNED_STEPS_S,
    RERUN_STEP_S,
    SETUP_PLANNED_S,
    START_PLANNED_S,
    STEPS,
    TRANSFER_PLANNED_S,
    WARM_SETUP_S,
    limits,
    stop_reserve,
)

RERUN_END_S = RERUN_STEP_S + WARM_SETUP_S + END_RESERVE_S  # a rerun's own command, by bash's SECONDS


def lease_rows() -> list[tuple[str, int, str]]:
    """The lease's device time, part by part: (what, seconds, note); they add up to LEASE_S."""
    return [
        ("machine start", START_PLANNED_S, "90-120 s seen"),
        (f"the command (timeout_s {COMMAND_S})", COMMAND_END_S,
         f"{SETUP_PLANNED_S} s install, unpack and import check + {PLANNED_STEPS_S} s of steps + {END_RESERVE_S} s "
         "summary and tarball"),
        ("transfer back", TRANSFER_PLANNED_S, "summary.md and the tarball"),
        ("left", LEFT_S, f"a rerun of one step estimated at <= {RERUN_STEP_S} s, at once on the warm machine (it "
                         f"stays warm 30 s; no machine starts under {NO_START_UNDER_S} s left); no second command "
                         "of steps"),
    ]


def lease_plan(steps: list[ledger.LedgerStep], kind: str, hashes: dict[str, str], torch: str,
               names: list[str] | None, device_command: Callable[..., str]) -> str:
    """The dry run's text: the lease, the command's steps with their limits, what stays for later, the commands."""
    lines = [f"A 15-minute lease on {kind} (torch {torch} assumed), in device time:", ""]
    lines += [f"    {what:<30} {seconds:>4} s  {note}" for what, seconds, note in lease_rows()]
    lines += [f"    {'total':<30} {LEASE_S:>4} s", ""]
    if names is None:
        chosen = ledger.plan(steps, kind, hashes, torch, PLANNED_STEPS_S)
        picked = {p.step.name: (p.why, p.estimate_s) for p in chosen}
        head = (f"The command's steps, the ledger's plan for {kind} (never run on it first, then stale), within "
                f"{PLANNED_STEPS_S} s:")
    else:
        picked = {n: ("named by --steps", float(STEPS[n].limit_s)) for n in names}
        head = f"The command's steps, named by --steps, within {PLANNED_STEPS_S} s:"
    lines += [head, ""]
    if picked:
        lines += [f"    {'step':<29} {'why':<44} {'estimate':>8} {'limit':>6} {'SIGTERM at':>10}"]
        shares = limits(list(picked), PLANNED_STEPS_S, STEPS, {n: e for n, (_, e) in picked.items()})
        for name, (why, estimate) in picked.items():
            sigterm = shares[name] - stop_reserve(STEPS[name])
            lines.append(f"    {name:<29} {why:<44} {estimate:>6.0f} s {shares[name]:>4.0f} s " +
                         (f"{sigterm:>8.0f} s" if sigterm >= MIN_STEP_S else "  too little time"))
        lines += [f"    at the worst, the command ends {SETUP_PLANNED_S} + {PLANNED_STEPS_S} + {END_RESERVE_S} = "
                  f"{COMMAND_END_S} s into it (its limit: {COMMAND_S} s)", ""]
    else:
        lines += [f"    nothing: every ledger step is done on {kind} at torch {torch}", ""]
    later = [s.name for s in steps if s.name not in picked and ledger.status(s, kind, hashes, torch) is not None]
    lines += [f"Left for later leases on {kind}: {', '.join(later) or 'none'}.", "",
              'On the lent machine: carry [".whl"] (made here by `python -m benchmarks.gpu pack`), timeout_s '
              f"{COMMAND_S}, one command:", "", f"    {device_command(','.join(names) if names else None)}", "",
              "A rerun of one short step that failed for a reason fixed here, at once while the machine is warm:", "",
              f"    {device_command('STEP', RERUN_END_S)}", "",
              "Then here: python -m benchmarks.gpu merge TARBALL (RESULTS.md, benchmarks/history/, the ledger, "
              "benchmarks/gpu/runs/), and commit them."]
    return "\n".join(lines)

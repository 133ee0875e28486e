"""What `ablate run` says before its first measurement: what runs here and the plan, in a practitioner's words.

Two lines, then the expected cost the runner prints (`ablate.run.estimate`): a user wants what will run, for about
how long, and where the answer will appear, not the method. The method in full (blocks, racing, seeds) is one flag
away, `--explain`, and in the report's method section.
"""
from __future__ import annotations

from ablate.render.terminal import LINE
from ablate.run import estimate
from ablate.run.runner import Runner

HINT = " (how: --explain)"


def header(runner: Runner, search: str, trials: int | None, explain: bool) -> list[str]:
    """The header's lines, unwrapped; with `explain`, the method and what the cost's range leaves out too."""
    study, machine = runner.study, runner.machine
    runnable = len(runner.planner.runnable_combinations())
    plan = f"plan: {runner.planner.plain()}"
    lines = [f"{study.name}: {runnable} of its {study.size} combinations run on {machine.device_name}, "
             f"torch {machine.torch}",
             plan if explain or len(plan + HINT) > LINE else plan + HINT]
    if explain:  # the protocol as the grid runs here (every runnable combination, or a fraction), or TPE's picks
        lines.append("method: " + (runner.planner.describe() if search == "grid" else runner.protocol.describe(trials)))
        if caveat := estimate.plan(runner.planner, search).caveat():
            lines.append(f"cost: {caveat}")
    return lines

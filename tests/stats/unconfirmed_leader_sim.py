"""Candidate rules, simulated and not adopted: the baseline stands in for a race leader whose confirmation blocks read
it no faster than the baseline, where the baseline is in the set the race could not tell apart and no simpler member
was shown equivalent. What each would cost and buy against today's rule (the leader, unless a simpler member is shown
equivalent):

- `x1.00`: the baseline stands in where the 3 confirmation blocks read the leader at or below x1.00;
- `x0.95`: the same below x0.95;
- `adaptive`: there, 3 more confirmation blocks of the leader (and the baseline); the baseline stands in where all 6
  still read the leader at or below x1.00.

The grid is tests/stats/test_headline.py's 16 combinations of four techniques; "b", and every stack that holds it, is
truly `gain` faster, the rest do nothing. Studies run as the runner plans them (screening, the race, its confirmation
blocks, as `test_decisions.run_study`), then `ablate.stats.answer.verdicts.recommendation`. Per rule: how often the
answer is a truly faster stack, and how often a stack no faster than the loop.

    .venv/bin/python tests/stats/unconfirmed_leader_sim.py 0.06 100

prints one line per gain (benchmarks/RESULTS.md, "A leader its confirmation blocks read no faster than the loop").
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[2])]  # run as a script from anywhere

from test_decisions import BASE, Host, as_records  # noqa: E402
from test_headline import GRID  # noqa: E402

from ablate.stats.answer import verdicts  # noqa: E402
from ablate.stats.protocol import CONFIRM, Measurement, ProtocolSettings, race_plan, screening_plan  # noqa: E402
from ablate.stats.race import racing  # noqa: E402

GAINS = (1.0, 1.05, 1.10, 1.15)
PROTOCOL = ProtocolSettings()


def _read(ms: list[Measurement[str]]) -> tuple[str, float]:
    """Today's answer, and the leader over the baseline on the confirmation blocks (log) where the baseline could
    stand in (else infinity)."""
    rec = verdicts.recommendation(as_records(ms), 1.0, PROTOCOL)
    assert rec is not None
    shown = [m.combination for m in rec.members if m.combination in rec.equivalence
             and rec.equivalence[m.combination].shown]
    base = rec.equivalence.get(BASE)
    read = base.contrast.diff if base is not None and base.data == CONFIRM and not shown else math.inf
    return (shown[0] if shown else rec.leader.combination), read


def study(truth: dict[str, float], sigma: float, seed: int) -> tuple[dict[str, str], int]:
    """One study's answer under each rule, and the measurements `adaptive` added."""
    host = Host(truth, dict.fromkeys(truth, sigma), seed)
    ms = [host.measure(s) for s in screening_plan(list(truth), BASE, PROTOCOL, seed)]
    while (standing := racing.race(ms, BASE, set(truth), PROTOCOL)).next_block is not None:
        ms += [host.measure(s) for s in race_plan(standing.next_block, BASE, 1 + max(m.block for m in ms), seed,
                                                  standing.phase)]
    today, read = _read(ms)
    picks = {"today": today, "x1.00": BASE if read <= 0 else today, "x0.95": BASE if read <= math.log(0.95) else today}
    added = len(ms)
    if read <= 0:
        for _ in range(PROTOCOL.confirm_blocks):
            ms += [host.measure(s) for s in race_plan((today,), BASE, 1 + max(m.block for m in ms), seed, CONFIRM)]
        today, read = _read(ms)
    picks["adaptive"] = BASE if read <= 0 else today
    return picks, len(ms) - added


def main(sigma: float, studies: int) -> None:
    for gain in GAINS:
        truth = {c: math.log(gain) if "b" in c.split(" + ") else 0.0 for c in GRID}
        counts: dict[str, list[int]] = {}
        added = 0
        for seed in range(studies):
            picks, more = study(truth, sigma, 9000 + seed)
            added += more
            for rule, pick in picks.items():
                n = counts.setdefault(rule, [0, 0])
                n[0] += truth[pick] > 1e-12
                n[1] += pick != BASE and truth[pick] <= 1e-12
        said = [f"{rule}: truly faster {n[0]}, no faster than the loop {n[1]}" for rule, n in counts.items()]
        print(f"noise {sigma}, gain x{gain:.2f}, {studies} studies: " + "; ".join(said)
              + f"; adaptive's added measurements {added / studies:.1f} a study", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]))

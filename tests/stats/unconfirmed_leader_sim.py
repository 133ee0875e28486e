"""The rule adopted where a race leader's confirmation blocks read it no faster than the baseline, against the
rule before it and two simpler candidates not adopted. Each acts only where the baseline is in the set the race could
not tell apart and no simpler member was shown equivalent:

- `before`: the leader, unless a simpler member is shown equivalent;
- `x1.00`: the baseline stands in where the 3 planned confirmation blocks read the leader at or below x1.00;
- `x0.95`: the same below x0.95;
- `adaptive` (adopted): there, 3 more confirmation blocks of the leader (and the baseline); the baseline stands in
  where all 6 still read the leader at or below x1.00 (`ablate.stats.race.racing._unconfirmed`,
  `ablate.stats.answer.verdicts.Recommendation.unconfirmed`).

The grid is tests/stats/test_headline.py's 16 combinations of four techniques; "b", and every stack that holds it, is
truly `gain` faster, the rest do nothing. Studies run as the runner plans them (`test_decisions.run_study`); the
other rules read the same study up to its third confirmation block. Per rule: how often the answer is a truly faster
stack, and how often a stack no faster than the loop.

    .venv/bin/python tests/stats/unconfirmed_leader_sim.py 0.06 100

prints one line per gain (benchmarks/RESULTS.md, "A leader its confirmation blocks read no faster than the loop").
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[2])]  # run as a script from anywhere

from test_decisions import BASE, as_records, run_study  # noqa: E402
from test_unconfirmed_leader import truth_of  # noqa: E402

from ablate.stats.answer import verdicts  # noqa: E402
from ablate.stats.protocol import ProtocolSettings  # noqa: E402
from ablate.stats.race import confirmation  # noqa: E402

GAINS = (1.0, 1.05, 1.10, 1.15)
PROTOCOL = ProtocolSettings()


def study(truth: dict[str, float], sigma: float, seed: int) -> tuple[dict[str, str], int]:
    """One study's answer under each rule, and the measurements `adaptive` added."""
    ms, _ = run_study(truth, dict.fromkeys(truth, sigma), PROTOCOL, seed)
    first = confirmation.planned(ms, PROTOCOL.confirm_blocks)
    rec = verdicts.recommendation(as_records(first), 1.0, PROTOCOL)
    adopted = verdicts.recommendation(as_records(ms), 1.0, PROTOCOL)
    assert rec is not None and adopted is not None
    before = rec.leader.combination if rec.unconfirmed else rec.pick.combination
    base = rec.equivalence.get(BASE)
    lower = rec.unconfirmed and base is not None and base.contrast.diff <= math.log(0.95)
    picks = {"before": before, "x1.00": rec.pick.combination, "x0.95": BASE if lower else before,
             "adaptive": adopted.pick.combination}
    return picks, len(ms) - len(first)


def main(sigma: float, studies: int) -> None:
    for gain in GAINS:
        truth = truth_of(gain)
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

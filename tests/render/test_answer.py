"""The report's answer in words (`ablate.render.answer`): what the recommendation section says of the race's leader."""
from __future__ import annotations

from ablate.config.choices import BASELINE
from ablate.render import answer
from ablate.stats.verdicts import Recommendation
from ablate.store.records import Record


def _lines(leader: str) -> str:
    record = Record(0, leader, {}, "complete")
    rec = Recommendation(leader=record, speedup=None, members=(record,), contrasts={}, eliminated=(), pending=(),
                         race=None, parity=None)
    return "\n".join(answer.recommendation_lines(rec, {}, 0.5))


def test_a_leader_without_confirmation_blocks_is_said_to_read_high():
    assert "no confirmation blocks ran, so it may read high" in _lines("compile")


def test_the_baseline_as_leader_is_not_said_to_read_high():
    # Its x1.00 is the ratio every other estimate is taken against: selection cannot inflate it.
    text = _lines(BASELINE)
    assert "x1.00 by definition" in text
    assert "may read high" not in text and "0 blocks" not in text

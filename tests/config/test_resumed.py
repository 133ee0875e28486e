"""A stored study resumes under the protocol it was measured with where only a default changed since (an upgrade
must not strand a half-measured study), and refuses where the study's own settings differ."""
from __future__ import annotations

from dataclasses import asdict

from ablate.config.design import ProtocolSettings, resumed


def _stored(**changes: object) -> dict[str, object]:
    return {**asdict(ProtocolSettings()), **changes}


def test_a_study_stored_under_the_former_default_margin_resumes_under_it():
    protocol, kept = resumed(_stored(equivalence_margin=0.02), ProtocolSettings())
    assert protocol == ProtocolSettings(equivalence_margin=0.02) and kept == ["equivalence_margin"]


def test_a_study_stored_before_a_setting_existed_follows_its_default():
    stored = _stored()
    del stored["remeasure"]
    assert resumed(stored, ProtocolSettings()) == (ProtocolSettings(), [])


def test_a_margin_the_study_now_sets_or_another_changed_setting_is_refused():
    assert resumed(_stored(equivalence_margin=0.02), ProtocolSettings(equivalence_margin=0.03)) == (None, [])
    assert resumed(_stored(race_blocks=4), ProtocolSettings()) == (None, [])
    assert resumed(_stored(equivalence_margin=0.04), ProtocolSettings()) == (None, [])  # never a default


def test_the_same_settings_resume_keeping_nothing():
    assert resumed(_stored(equivalence_margin=0.02), ProtocolSettings(equivalence_margin=0.02)) == (
        ProtocolSettings(equivalence_margin=0.02), [])

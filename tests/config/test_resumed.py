"""A stored study resumes under the protocol it was measured with where only a default changed since (an upgrade
must not strand a half-measured study), and refuses where the study's own settings differ or its file changed."""
from __future__ import annotations

from dataclasses import asdict

import pytest

from ablate.config.design import ProtocolSettings, resume, resumed
from ablate.config.validate import StudyError


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


def _resume(stored_protocol: dict[str, object] | None, stored_hash: str | None = "abc"):
    return resume(stored_protocol, ProtocolSettings(), stored_hash, file_hash="abc", name="tiny", file="tiny.yaml",
                  where="results/tiny")


def test_a_new_study_goes_on_under_its_own_protocol_and_says_nothing():
    assert _resume(None, stored_hash=None) == (ProtocolSettings(), None)


def test_a_resume_under_a_former_default_says_the_setting_it_keeps():
    protocol, said = _resume(_stored(equivalence_margin=0.02))
    assert protocol == ProtocolSettings(equivalence_margin=0.02)
    assert said == "resuming under the stored study's equivalence_margin=0.02: the default it was measured with"


def test_a_changed_file_or_another_protocol_is_one_error_naming_what_to_do():
    with pytest.raises(StudyError, match=r"tiny.yaml changed since .* \(hash xyz -> abc\); move results/tiny away"):
        _resume(_stored(), stored_hash="xyz")
    with pytest.raises(StudyError, match="the stored measurements of tiny follow another protocol"):
        _resume(_stored(race_blocks=4))


def test_a_study_stored_before_the_whole_table_resumes_as_it_was_measured_quick():
    """A store from before `quick` existed measured only what the answer needed: it goes on that way, and says so,
    rather than widening half-way into the whole table; a --quick run on a whole-table store is refused."""
    stored = _stored()
    del stored["quick"]
    protocol, said = _resume(stored)
    assert protocol == ProtocolSettings(quick=True)
    assert said == "resuming under the stored study's quick=True: the default it was measured with"
    with pytest.raises(StudyError, match="follow another protocol"):
        resume(_stored(), ProtocolSettings(quick=True), "abc", file_hash="abc", name="tiny", file="tiny.yaml",
               where="results/tiny")

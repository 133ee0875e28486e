"""What a user reads about a study: the protocol described as the study will run it, and combinations
named by the strategies' own names."""
from __future__ import annotations

from dataclasses import replace

from ablate.config.choices import SHORT, short_label
from ablate.config.design import SINGLE_PASS, ProtocolSettings, single_pass


def test_a_4_combination_study_is_screened_in_one_block_of_its_3_not_in_blocks_of_8():
    text = ProtocolSettings().describe(3)  # 4 combinations: the baseline and 3 others
    assert "screening in one block of 3 combinations plus 2 baseline measurements" in text
    assert "8" not in text and "up to 3 contenders" in text


def test_larger_studies_are_described_by_their_blocks():
    protocol = ProtocolSettings()
    assert "screening in 2 blocks of 8 combinations plus" in protocol.describe(16)
    assert "screening in 12 blocks of up to 8 combinations plus" in protocol.describe(95)  # mnist_cnn on a CPU
    assert "racing of up to 6 contenders" in protocol.describe(95)
    assert "screening in one block of 1 combination plus" in protocol.describe(1)


def test_the_blocks_past_the_planned_race_are_described_only_where_the_race_can_take_them():
    more = "(where still undecided, up to 6 more of the leader and its closest contender)"
    assert f"in at most 6 blocks {more}" in ProtocolSettings().describe(15)
    for protocol in (ProtocolSettings(race_blocks=1), ProtocolSettings(extra_race_blocks=0)):
        assert protocol.extra_blocks == 0 and "undecided" not in protocol.describe(15)  # too short to decide; none


def test_without_the_studys_size_the_description_is_still_true():
    assert "screening in blocks of up to 8 combinations" in ProtocolSettings().describe()
    assert "screening in one block plus 1 baseline measurement" in SINGLE_PASS.describe()
    assert "screening in one block of 40 combinations plus 1 baseline measurement" in SINGLE_PASS.describe(40)
    assert ProtocolSettings(full_blocks=3).describe(3).startswith("every combination in each of 3 blocks")


def test_the_single_pass_keeps_the_studys_load_guard():
    mine = single_pass(ProtocolSettings(foreign_load_limit=None, remeasure=5, seeds=4))
    assert (mine.foreign_load_limit, mine.remeasure) == (None, 5)
    assert mine == replace(SINGLE_PASS, foreign_load_limit=None, remeasure=5)  # the blocks are the single pass's


def test_set_to_none_keeps_its_name_when_labels_are_shortened():
    assert short_label("num_workers(n=2) + set_to_none + amp(dtype=bf16)") == "workers(2) + set_to_none + amp(bf16)"
    assert "set_to_none" not in SHORT



def test_the_plan_is_said_as_a_practitioner_would():
    protocol = ProtocolSettings()
    assert protocol.plain(24, 48, "finalists") == ("measure 24 of 48, predict the rest, race the fastest 6, then "
                                                   "train the finalists' accuracy")
    assert protocol.plain(21, 48, "each group", picked=True).startswith("measure 21 of 48, picked by TPE,")
    assert protocol.plain(3, 3, "none") == "measure all 3, race the fastest 2, throughput only"
    full = ProtocolSettings(full_blocks=4)
    assert full.plain(12, 12, "none") == "measure all 12 in each of 4 blocks, throughput only"
    assert SINGLE_PASS.plain(48, 48, "each group") == ("measure all 48 once against one baseline (no interval), then "
                                                       "train each group's accuracy once")

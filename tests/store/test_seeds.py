"""A run's seeds: drawn per run unless the study pins them, and kept by a resume."""
from __future__ import annotations

from ablate.store import seeds


def test_two_runs_draw_different_seeds_and_a_resume_keeps_its_own():
    first, second = seeds.resolve(None, None), seeds.resolve(None, None)
    assert first != second  # 2^62 possible pairs: equal only by a bug
    assert seeds.resolve(first, None) == first  # the stored ones win, pinned or not
    assert seeds.resolve(first, 7) == first


def test_a_pinned_seed_is_both_seeds_and_parity_seeds_follow_the_training_seed():
    pinned = seeds.resolve(None, 7)
    assert pinned == {"protocol": 7, "training": 7}
    assert [seeds.training(pinned, i) for i in range(3)] == [7, 8, 9]

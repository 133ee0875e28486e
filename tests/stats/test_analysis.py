"""Speed-ups, factorial effects and costs (`ablate.stats.speedups`, `effects`, `costs`) on synthetic trial records
with known effects and noise (the compose line: tests/config/test_combination.py)."""
from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ablate.config import study as studies
from ablate.config.choices import BASELINE
from ablate.stats.answer import verdicts
from ablate.stats.answer.costs import break_even, time_to_target
from ablate.stats.screening.effects import EffectFit, fit_effects, throughput_observations
from ablate.stats.speedups import speedups
from ablate.store.records import Record, combine

# Known truth on the log-throughput scale: main effects, one planted interaction, one null technique.
DIMS = {"workers": ["off", "w"], "amp": ["off", "bf16"], "pin": ["off", "pin"], "graph": ["off", "ts", "compile"]}
TRUE_MAIN = {"w": 0.30, "bf16": 0.10, "pin": 0.0, "ts": 0.20, "compile": -0.10}
TRUE_PAIR = {("w", "bf16"): 0.15}
BASE_RATE = 1000.0
WINDOW_NOISE = 0.02  # standard deviation of one window's log throughput


def _label(levels: dict[str, str]) -> str:
    return " + ".join(v for v in levels.values() if v != "off") or BASELINE


def factorial(rng: np.random.Generator, windows: int = 3) -> list[Record]:
    records = []
    for number, choice in enumerate(itertools.product(*DIMS.values())):
        levels = dict(zip(DIMS, choice))
        on = set(choice) - {"off"}
        mu = math.log(BASE_RATE) + sum(TRUE_MAIN[t] for t in on)
        # The planted interaction is the extra log-throughput when both are on, centred as the model defines it.
        for (a, b), effect in TRUE_PAIR.items():
            mu += effect * ((a in on) - 0.5) * ((b in on) - 0.5)
        rates = np.exp(mu + rng.normal(0, WINDOW_NOISE, windows))
        metrics = {"throughput": float(np.median(rates)),
                   **{f"throughput_window_{i}": float(r) for i, r in enumerate(rates)}}
        records.append(Record(number, _label(levels), levels, "complete", metrics=metrics))
    return records


def _fit(records: list[Record]) -> EffectFit:
    fit = fit_effects(throughput_observations(records), list(DIMS), "log throughput")
    assert isinstance(fit, EffectFit), fit
    return fit


def test_main_effects_and_the_planted_interaction_are_recovered_within_their_intervals():
    fit = _fit(factorial(np.random.default_rng(7)))
    assert fit.full_factorial and fit.interactions
    effects = {e.techniques: e for e in fit.effects}
    for technique, truth in TRUE_MAIN.items():
        i = effects[(technique,)].interval
        assert i.low <= truth <= i.high, (technique, truth, i)
    planted = effects[("w", "bf16")].interval
    assert planted.low <= TRUE_PAIR[("w", "bf16")] <= planted.high
    assert planted.distinguishable
    assert not effects[("pin",)].interval.distinguishable  # zero true effect: not distinguishable from noise
    for technique in ("w", "bf16", "ts", "compile"):
        assert effects[(technique,)].interval.distinguishable


def test_the_intervals_cover_every_true_effect_at_once_in_95_percent_of_studies():
    """Simultaneous coverage: in a study, every main effect's and interaction's interval covers its truth (zero
    where none was planted), so a term without an effect reads "distinguishable" in at most 5% of studies, and
    a planted one still does."""
    rng = np.random.default_rng(0)
    covered, null_flagged, planted_found, runs = 0, 0, 0, 400
    for _ in range(runs):
        fit = _fit(factorial(rng))
        truth = {e.techniques: TRUE_MAIN.get(e.techniques[0], 0.0) if not e.interaction
                 else TRUE_PAIR.get(e.techniques, TRUE_PAIR.get(e.techniques[::-1], 0.0)) for e in fit.effects}
        covered += all(e.interval.low <= truth[e.techniques] <= e.interval.high for e in fit.effects)
        null_flagged += any(e.interval.distinguishable for e in fit.effects if truth[e.techniques] == 0.0)
        planted_found += next(e for e in fit.effects if e.techniques == ("w", "bf16")).interval.distinguishable
    assert len(fit.effects) > 10  # a family large enough that pointwise intervals would not hold it
    assert covered / runs >= 0.93 and null_flagged / runs <= 0.07  # 400 runs: 2 standard errors about 5%
    assert planted_found / runs >= 0.95


def test_the_block_factor_keeps_drift_between_blocks_out_of_the_effects():
    from dataclasses import replace

    records = factorial(np.random.default_rng(3))
    # Half the grid ran in a second block on a machine 30% slower, and that half is mostly "w": unblocked,
    # the drift would eat w's effect.
    slow = {r.number for r in records if r.levels["workers"] == "w" and r.levels["amp"] == "off"} | {0}
    shifted = [replace(r, block=1, metrics={k: v * 0.7 if k.startswith("throughput") else v
                                            for k, v in r.metrics.items()}) if r.number in slow else r
               for r in records]
    fit = _fit(shifted)
    effects = {e.techniques: e.interval for e in fit.effects}
    assert effects[("w",)].low <= TRUE_MAIN["w"] <= effects[("w",)].high
    assert "2 blocks" in fit.note


def test_a_partial_search_is_estimated_from_what_ran_and_says_so():
    rng = np.random.default_rng(1)
    records = list(rng.choice(factorial(rng), size=16, replace=False))  # what a guided search might have run
    fit = fit_effects(throughput_observations(records), list(DIMS), "log throughput")
    assert isinstance(fit, EffectFit)
    assert not fit.full_factorial and "Not a full factorial" in fit.note


def test_too_few_or_confounded_trials_give_a_reason_instead_of_numbers():
    records = factorial(np.random.default_rng(1))
    few = fit_effects(throughput_observations(records[:3]), list(DIMS), "x")
    assert isinstance(few, str) and "too few" in few
    confounded = [r for r in records if (r.levels["workers"] == "off") == (r.levels["amp"] == "off")]
    together = fit_effects(throughput_observations(confounded), list(DIMS), "x")
    assert isinstance(together, str) and "always switched together" in together


def _measured(number: int, combination: str, rate: float, block: int, phase: str = "screen") -> Record:
    windows = {f"throughput_window_{i}": rate * f for i, f in enumerate((0.99, 1.0, 1.01))}
    return Record(number, combination, {"amp": "off" if combination == BASELINE else combination}, "complete",
                  metrics={"throughput": rate, **windows}, block=block, phase=phase)


def test_speedup_is_paired_within_blocks_and_its_interval_comes_from_between_blocks():

    # The baseline drifts from 1000 to 700 samples/s over four blocks; bf16 is 1.5x its own block's baseline,
    # with a little process noise. Unpaired, the drift would pass for noise or for an effect.
    rates = {0: (1000, 1500 * 1.02), 1: (900, 1350 * 0.98), 2: (800, 1200 * 1.01), 3: (700, 1050 * 0.99)}
    ms = [m for b, (base, fast) in rates.items() for m in (_measured(2 * b, BASELINE, base, b, "race"),
                                                            _measured(2 * b + 1, "bf16", fast, b, "race"))]
    found = {s.record.combination: s for s in speedups(combine(ms))}
    fast = found["bf16"]
    assert fast.interval.low < 1.5 < fast.interval.high
    assert fast.point == pytest.approx(1.5, rel=0.01)
    # Its own spread is the only source of noise: its own alone (a prior of its own spread would count it twice).
    assert fast.estimate.blocks == 4 and fast.estimate.noise == "own" and fast.estimate.df == 3
    assert found[BASELINE].point == 1.0


def test_one_block_alone_gives_an_estimate_without_an_interval():

    found = {s.record.combination: s for s in speedups(combine(
        [_measured(0, BASELINE, 1000, 0), _measured(1, "bf16", 1500, 0)]))}
    assert found["bf16"].point == pytest.approx(1.5) and found["bf16"].interval is None


def _record(number: int, combination: str, rate: float, accuracy: float) -> Record:
    return Record(number, combination, {"x": combination if combination != BASELINE else "off"}, "complete",
                  metrics={"throughput": rate, "test_accuracy": accuracy, "throughput_window_0": rate},
                  accuracy_trained=True, accuracy_group=combination)  # one seed, no test-set size: a hard cut


def test_the_recommendation_skips_a_faster_combination_that_breaks_accuracy_parity():
    records = [_record(0, BASELINE, 1000, 98.0), _record(1, "fast but wrong", 2000, 97.0),
               _record(2, "fast and right", 1500, 97.8)]
    assert [r.number for r in verdicts.parity_failures(records, 0.5)] == [1]
    assert verdicts.recommendation(records, 0.5).leader.number == 2
    assert verdicts.recommendation(records, 1.5).leader.number == 1  # a looser tolerance admits it


GRAPH_STUDY = """
model: mnist_cnn
dataset: mnist
space:
  amp: [off, {amp: {dtype: bf16}}]
  graph: [off, compile]
budget: {train_samples: 6400}
"""


def test_break_even_steps_and_budget_time_of_compilation(tmp_path: Path):
    path = tmp_path / "graph.yaml"
    path.write_text(GRAPH_STUDY)
    study = studies.load(str(path), "cpu")
    common = {"train_samples": 640.0, "train_steps": 10.0, "prepare_model_s": 0.0}
    eager = Record(0, BASELINE, {"amp": "off", "graph": "off"}, "complete",
                   metrics={**common, "throughput": 1000.0, "first_step_s": 0.1})
    compiled = Record(1, "compile", {"amp": "off", "graph": "compile"}, "complete",
                      metrics={**common, "throughput": 2000.0, "first_step_s": 10.1})
    (b,) = break_even([eager, compiled], study)
    assert b.extra_s == pytest.approx(10.0)
    assert b.saving_per_step_s == pytest.approx(64 / 1000 - 64 / 2000)
    assert b.steps == pytest.approx(10.0 / 0.032)
    assert b.budget_s == pytest.approx(10.1 + (6400 - 64) / 2000) and not b.measured
    slower = Record(1, "compile", compiled.levels, "complete", metrics={**compiled.metrics, "throughput": 900.0})
    assert break_even([eager, slower], study)[0].steps is None  # never pays off


def test_a_compiled_combination_trained_from_its_warm_cache_keeps_its_cold_one_off_cost(tmp_path: Path):
    """The parity race trains a compiled group after screening measured it: its training (the combination's
    primary, which carries its accuracy) starts from the warm cache, so the one-off cost and the budget time
    must not be read from it; a fresh start pays the cold measurement's."""
    path = tmp_path / "graph.yaml"
    path.write_text(GRAPH_STUDY)
    study = studies.load(str(path), "cpu")
    common = {"train_samples": 640.0, "train_steps": 10.0, "prepare_model_s": 0.0, "early_steps_excess_s": 0.0}
    eager = Record(0, BASELINE, {"amp": "off", "graph": "off"}, "complete",
                   metrics={**common, "throughput": 1000.0, "first_step_s": 0.1, "one_off_s": 0.1})
    levels = {"amp": "off", "graph": "compile"}
    cold = Record(1, "compile", levels, "complete", phase="screen", accuracy_group="compile",
                  metrics={**common, "throughput": 2000.0, "first_step_s": 10.1, "one_off_s": 10.1,
                           "compile_cache_warm": 0.0})
    warm = Record(2, "compile", levels, "complete", phase="parity", seed_index=0, accuracy_trained=True,
                  accuracy_group="compile",
                  metrics={**common, "throughput": 1900.0, "first_step_s": 1.1, "one_off_s": 1.1, "train_time_s": 4.2,
                           "compile_cache_warm": 1.0, "test_accuracy": 97.0, "test_loss": 0.1, "target_reached": 1.0,
                           "time_to_target_s": 2.0, "time_to_target_e2e_s": 3.5})
    second = replace(warm, number=3, seed_index=1,
                     metrics={**warm.metrics, "one_off_s": 1.5, "time_to_target_e2e_s": 4.0})
    combined = combine([eager, cold, warm, second])
    compiled = next(r for r in combined if r.combination == "compile")
    assert compiled.number == 2 and compiled.accuracy == 97.0  # the training carries the accuracy
    assert compiled.metrics["one_off_s"] == 10.1 and compiled.metrics["first_step_s"] == 10.1  # the cold one-off
    (b,) = break_even(combined, study)
    assert b.extra_s == pytest.approx(10.0)
    assert not b.measured and b.budget_s == pytest.approx(10.1 + (6400 - 64) / 2000)  # not the warm 4.2 s
    # Time to the target end to end, as a fresh start pays it: each seed's warm one-off cost swapped for the cold.
    assert compiled.metrics["time_to_target_e2e_s"] == pytest.approx(3.5 + 9.0)
    (found,) = time_to_target(combined)
    assert found.seconds == (2.0, 2.0) and found.e2e_seconds == pytest.approx((3.5 + 9.0, 4.0 + 8.6))
    # Trained cold (the compiled group's first measurement was its training), the training's own figures stand.
    (only,) = combine([replace(warm, metrics={**warm.metrics, "compile_cache_warm": 0.0})])
    assert only.metrics["one_off_s"] == 1.1


def test_break_even_of_a_language_model_counts_steps_in_sequences_while_throughput_counts_tokens(tmp_path: Path):
    path = tmp_path / "graph.yaml"
    path.write_text(GRAPH_STUDY.replace("model: mnist_cnn\ndataset: mnist", "model: byte_gpt\ndataset: kjv\n"
                                        "task: {next_token: {seq_len: 100}}"))
    study = studies.load(str(path), "cpu")
    common = {"train_samples": 640.0, "train_steps": 10.0, "prepare_model_s": 0.0}
    eager = Record(0, BASELINE, {"amp": "off", "graph": "off"}, "complete",  # 1,000 sequences/s
                   metrics={**common, "throughput": 100_000.0, "first_step_s": 0.1})
    compiled = Record(1, "compile", {"amp": "off", "graph": "compile"}, "complete",
                      metrics={**common, "throughput": 200_000.0, "first_step_s": 10.1})
    (b,) = break_even([eager, compiled], study)
    assert b.saving_per_step_s == pytest.approx(64 / 1000 - 64 / 2000)  # the same steps as the image case
    assert b.budget_s == pytest.approx(10.1 + (6400 - 64) / 2000)


def _blocked(combination: str, levels: dict[str, str], rate: float, block: int, number: int,
             extra: dict[str, float]) -> Record:
    return Record(number, combination, levels, "complete", block=block, phase="race",
                  metrics={"throughput": rate, "throughput_window_0": rate, **extra})


def test_break_even_interval_covers_the_true_break_even_in_95_percent_of_studies(tmp_path: Path):
    """Compilation 1.25x faster per step for 10 s more one-off cost, measured in 4 blocks with 6% process noise:
    the break-even's interval (from the speed-up's) covers the true 781 steps at least as often as promised."""

    path = tmp_path / "graph.yaml"
    path.write_text(GRAPH_STUDY)
    study = studies.load(str(path), "cpu")
    truth_steps = 10.0 / (64 / 1000 * (1 - 1 / 1.25))
    rng = np.random.default_rng(11)
    hits, runs, widths = 0, 300, []
    for _ in range(runs):
        out, number = [], 0
        for block in range(4):
            for combination, graph, rate, first in ((BASELINE, "off", 1000.0, 0.1),
                                                    ("compile", "compile", 1250.0, 10.1)):
                out.append(_blocked(combination, {"amp": "off", "graph": graph}, rate * math.exp(rng.normal(0, 0.06)),
                                    block, number, {"first_step_s": first, "prepare_model_s": 0.0,
                                                           "train_samples": 640.0, "train_steps": 10.0}))
                number += 1
        (b,) = break_even(combine(out), study)
        low, high = b.steps_interval
        assert low is not None and low <= b.steps and (high is None or b.steps <= high)
        hits += low <= truth_steps and (high is None or truth_steps <= high)
        widths.append(high is None)
    print("break-even coverage:", hits / runs)
    assert hits / runs >= 0.93, hits / runs
    assert np.mean(widths) < 0.5  # usually bounded: "possibly never" only where the speed-up's interval reaches x1


def test_time_to_target_is_averaged_over_seeds_with_an_interval_that_covers():
    rng = np.random.default_rng(12)
    hits, runs = 0, 400
    for _ in range(runs):
        records = [Record(i, BASELINE, {}, "complete", accuracy_trained=True, seed_index=i,
                          metrics={"target_reached": 1.0, "time_to_target_s": float(rng.normal(40, 4)),
                                   "time_to_target_e2e_s": 50.0})
                   for i in range(3)]
        (t,) = time_to_target(records)
        i = t.interval()
        hits += i.low <= 40 <= i.high
    assert 0.92 <= hits / runs <= 0.98, hits / runs
    missed = [Record(0, "amp", {}, "complete", accuracy_trained=True, metrics={"target_reached": 0.0}),
              Record(1, "amp", {}, "complete", accuracy_trained=True, seed_index=1,
                     metrics={"target_reached": 1.0, "time_to_target_s": 30.0, "time_to_target_e2e_s": 31.0})]
    (t,) = time_to_target(missed)
    assert (t.reached, t.interval()) == (1, None)  # a seed that never reached it has no time to average


def test_the_factorial_note_says_how_unequally_raced_combinations_weigh():
    from dataclasses import replace

    records = factorial(np.random.default_rng(4))
    raced = [replace(r, number=100 + k) for k in range(6) for r in records[:1]]  # the baseline measured 7 times
    assert "each weighing equally" in _fit(records).note
    note = _fit(records + raced).note
    assert "1 to 7" in note and "up to 7 times as much as one measured once" in note, note

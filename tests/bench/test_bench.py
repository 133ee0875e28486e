"""`make bench` end to end at its smallest, and its rewrite of RESULTS.md in place."""
from __future__ import annotations

import pytest
from scipy import stats
from tiny_mnist import tiny_study

from benchmarks.__main__ import main
from benchmarks.sections import rewrite as _rewrite

KEPT = "A hand-written record that must survive."


@pytest.mark.slow
def test_bench_writes_every_section_for_this_device(tmp_path, mnist):
    out = tmp_path / "RESULTS.md"
    out.write_text(f"# Benchmark records\n\n{KEPT}\n")
    # tiny.yaml (mnist_cnn's budget: minutes per trial), on a small CNN (tests/support/tiny_mnist.py): what the
    # sections time is the harness, not the model.
    tiny = str(tiny_study(tmp_path / "study"))
    assert main(["--device", "cpu", "--no-grid", "--pairs", "1", "--repeats", "1", "--steps", "3", "--study", tiny,
                 "--profile-pairs", "1", "--output", str(out)]) == 0
    text = out.read_text()
    for heading in ("### 1. Framework overhead", "### 2. Trial start-up", "### 3. Measurement noise",
                    "### 4. The profiling window", "### 5. Full mnist_cnn grid"):
        assert heading in text
    assert "no interval from one pair" in text and "Where the baseline's step goes (median shares): data " in text
    assert KEPT in text and "torch " in text and "commit " in text


def test_a_second_run_replaces_its_own_section_and_nothing_else(tmp_path):
    out = tmp_path / "RESULTS.md"
    out.write_text(f"# Benchmark records\n\n{KEPT}\n")
    for run in ("first", "second"):
        _rewrite(out, "cpu", f"<!-- bench:cpu:start x -->\n{run} cpu run\n<!-- bench:cpu:end -->")
    _rewrite(out, "cuda", "<!-- bench:cuda:start x -->\ncuda run\n<!-- bench:cuda:end -->")
    text = out.read_text()
    assert KEPT in text and "second cpu run" in text and "first cpu run" not in text and "cuda run" in text
    assert text.count("<!-- bench:cpu:start") == 1


def test_the_grid_section_keeps_the_table_and_the_report_s_answers(tmp_path):
    from benchmarks.__main__ import _grid
    from benchmarks.grid import GridRun

    report = tmp_path / "report.md"
    report.write_text("# r\n\n## The answer\n\nfastest: **x**\n\n"
                      "## Speed-up of every combination\n\nSPEEDUP-BODY\n\n"
                      "## What each technique is worth\n\n![plot](effects.png)\n\n| technique |\n\n"
                      "## One-off costs\n\nno\n")
    output = ("mnist_cnn: 4 combinations (grid) on cpu\n#0 baseline: complete\n"
              "combination    state     samples/s    reason\n-----------    -----     ---------    ------\n"
              "baseline       complete  1000.0\npin_memory     skipped                pinned memory needs a GPU\n\n"
              "results table: x.csv\n")
    lines = "\n".join(_grid(GridRun(754.4, output, tmp_path, report)))
    assert "**12 min 34 s**" in lines
    assert "baseline       complete  1000.0" in lines and "pinned memory" not in lines and "1 skipped rows" in lines
    assert "### The answer" in lines and "fastest: **x**" in lines and "| technique |" in lines
    assert "SPEEDUP-BODY" not in lines and "![plot]" not in lines and "One-off" not in lines


def test_the_reproducibility_check_compares_runs_by_their_combined_standard_errors():
    import math

    from benchmarks.reproducibility import compare

    def summary(pick: str, entries: dict[str, tuple[float, float]], raced: str = "") -> dict:
        rows = [{"combination": c, "speedup": s, "log_se": se, "low": s * math.exp(-2 * se),
                 "high": s * math.exp(2 * se), "phase": "race" if c == raced else "screen"}
                for c, (s, se) in entries.items()]
        return {"speedups": rows, "recommendation": next(r for r in rows if r["combination"] == pick)}

    first = summary("a", {"a": (1.50, 0.05), "b": (1.20, 0.05), "c": (0.90, 0.05)})
    second = summary("a", {"a": (1.45, 0.05), "b": (1.20, 0.05), "c": (1.30, 0.05)})  # c moved far
    found = compare(first, second)
    assert (found.agreeing, found.compared) == (2, 3)
    assert found.recommendation_agrees == (True, True)
    assert found.widths[0] == pytest.approx(math.exp(0.2))
    assert found.chi2 == pytest.approx((math.log(1.5 / 1.45) ** 2 + math.log(0.9 / 1.3) ** 2) / (2 * 0.05 ** 2))
    assert found.chi2_screened == (pytest.approx(found.chi2), 3) and found.scored == 3
    second["speedups"][1]["log_se"] = None  # b has no standard error in run 2: compared, not scored
    unscored = compare(first, second)
    assert (unscored.compared, unscored.scored) == (3, 2)
    assert unscored.chi2_p == pytest.approx(stats.chi2.sf(unscored.chi2, 2))
    raced = compare(first, summary("a", {"a": (1.45, 0.05), "b": (1.20, 0.05), "c": (1.30, 0.05)}, raced="c"))
    assert raced.chi2_screened == (pytest.approx(math.log(1.5 / 1.45) ** 2 / (2 * 0.05 ** 2)), 2)  # c left out
    other = summary("b", {"a": (1.10, 0.01), "b": (1.60, 0.01), "c": (0.90, 0.01)})
    assert compare(first, other).recommendation_agrees == (False, False)  # each pick is elsewhere in the other


def test_the_reproducibility_check_says_whether_the_headlines_agree_or_one_was_shown_equivalent():
    from benchmarks.reproducibility import headlines

    def run(pick: str, leader: str, shown: tuple[str, ...] = ()) -> dict:
        members = [{"combination": c, "equivalence": {"shown": c in shown}} for c in dict.fromkeys((leader, pick))]
        return {"recommendation": {"combination": pick, "leader": leader, "members": members}}

    assert headlines(run("a", "a"), run("a", "a + b")) == "the same"
    # Run 1 led with "a + b" and showed "a" within the margin; run 2 headlined its leader "a + b".
    assert headlines(run("a", "a + b", shown=("a",)), run("a + b", "a + b")) == "different, shown equivalent in run 1"
    assert headlines(run("a", "a"), run("a + b", "a + b")) == "different, not shown equivalent"


def test_the_window_length_benchmarks_interval_for_the_trial_to_trial_spread_covers_at_its_level():
    """Log throughputs drawn normal with a known spread: the chi-square interval covers it in 95% of runs."""
    import math
    import random

    from benchmarks.window_length import spread

    rng, truth, runs = random.Random(3), 0.08, 2_000
    covered = 0
    for _ in range(runs):
        found = spread([math.exp(rng.gauss(math.log(600), truth)) for _ in range(10)])
        covered += found.low <= truth <= found.high
        assert found.low < found.sd < found.high
    assert 0.93 <= covered / runs <= 0.97


def _two_level(rng, trials: int, windows: int, sd_trial: float, sd_window: float) -> list[list[float]]:
    """Log throughputs: a trial's own level, normal about 0, and its windows normal about that."""
    out = []
    for _ in range(trials):
        level = rng.gauss(0.0, sd_trial)
        out.append([level + rng.gauss(0.0, sd_window) for _ in range(windows)])
    return out


def test_the_repetitions_benchmarks_variance_components_are_unbiased_and_their_intervals_cover():
    """Kalibera and Jones's estimators on a simulated two-level experiment of known components (12 trials of
    6 windows, the benchmark's default): T1^2 and T2^2 average to the truth, and the chi-square intervals
    of S1^2 and S2^2 cover what they estimate in 95% of runs."""
    import random

    from benchmarks.repetitions import components, variance_interval

    rng, sd_trial, sd_window, runs = random.Random(5), 0.09, 0.07, 2_000
    t1s, t2s, covered1, covered2 = [], [], 0, 0
    for _ in range(runs):
        found = components(_two_level(rng, 12, 6, sd_trial, sd_window))
        t1s.append(found.t1)
        t2s.append(found.t2)
        low, high = variance_interval(found.s1, found.df1)
        covered1 += low <= sd_window ** 2 <= high
        low, high = variance_interval(found.s2, found.df2)
        covered2 += low <= sd_trial ** 2 + sd_window ** 2 / 6 <= high  # what the trials' means vary by
    assert sum(t1s) / runs == pytest.approx(sd_window ** 2, rel=0.02)
    assert sum(t2s) / runs == pytest.approx(sd_trial ** 2, rel=0.05)  # S2^2 has 11 df: its mean of 2,000 within ~3%
    assert 0.93 <= covered1 / runs <= 0.97 and 0.93 <= covered2 / runs <= 0.97


def test_the_optimal_windows_per_trial_minimise_the_time_for_a_given_precision():
    """Kalibera and Jones's optimum, sqrt(c2/c1 * T1^2/T2^2) rounded up, is next to the whole number of windows
    that minimises (T2^2 + T1^2/r)(c2 + r c1), and the relative cost of the study's own count is 1."""
    import itertools
    import math

    from benchmarks.repetitions import components, optimal_windows, relative_cost

    for t1, t2, c1, c2 in itertools.product((0.001, 0.005, 0.02), (0.002, 0.01), (0.05, 1.9, 5.0), (0.5, 4.3, 20.0)):
        best = optimal_windows(t1, t2, c1, c2)
        exact = math.sqrt(c2 / c1 * t1 / t2)
        cheapest = min(range(1, 200), key=lambda r: relative_cost(t1, t2, c1, c2, r, 3))
        assert best == max(1, math.ceil(exact)) and cheapest in (max(1, math.floor(exact)), best)
        assert relative_cost(t1, t2, c1, c2, 3, 3) == 1.0
    assert optimal_windows(0.005, 0.0, 1.9, 4.3) is None  # trials vary no more than their windows: no limit
    assert optimal_windows(0.005, 0.01, 1.9, 4.3) == 2  # sqrt(4.3/1.9 * 0.5) = 1.06, rounded up
    with pytest.raises(ValueError, match="two or more"):
        components([[0.0, 0.1], [0.2]])


def test_the_warm_up_check_finds_a_transient_and_reads_none_where_there_is_none():
    """`plateau_offsets` on simulated trials: a first window 5% slow (a warm-up too short) reads below zero with an
    interval that excludes it, the later windows' intervals cover zero; trials with no transient cover zero at
    every window in about 95% of runs."""
    import random

    from benchmarks.repetitions import plateau_offsets

    rng = random.Random(11)
    slow = _two_level(rng, 12, 8, 0.09, 0.02)
    for trial in slow:
        trial[0] -= 0.05
    found = plateau_offsets(slow)
    assert found[0][0] + found[0][1] < 0
    assert all(abs(mean) <= half for mean, half in found[2:])
    covered = [abs(mean) <= half for _ in range(500) for mean, half in plateau_offsets(_two_level(rng, 12, 8, 0.09,
                                                                                                  0.02))[:4]]
    assert 0.93 <= sum(covered) / len(covered) <= 0.97


def test_the_warm_up_check_names_a_combination_by_its_options_and_refuses_a_wrong_one():
    from ablate.config import study as studies
    from benchmarks.repetitions import chosen

    study = studies.load("mnist_cnn", "cpu")
    space = dict(study.space)
    options = dict(zip(space, chosen(study, ["graph=1", "amp=1"])))
    assert options["graph"] == space["graph"][1] and options["amp"] == space["amp"][1]
    assert options["batch_size"] == space["batch_size"][0]
    for wrong in ("graph=7", "nothing=1", "graph"):
        with pytest.raises(SystemExit, match="--choose"):
            chosen(study, [wrong])


def test_overhead_blocks_too_short_to_halve_are_one_line_and_exit_2(tmp_path, capsys):
    from benchmarks.__main__ import main

    with pytest.raises(SystemExit) as stopped:
        main(["--steps", "1", "--output", str(tmp_path / "RESULTS.md")])
    assert stopped.value.code == 2 and "2 steps or more" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())

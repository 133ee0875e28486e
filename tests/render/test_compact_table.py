"""The default results table: the answer in 100 columns, long labels shortened but never confused, skips folded."""
from __future__ import annotations

import itertools

from ablate.config.choices import BASELINE, short_label
from ablate.render import results
from ablate.stats.answer.comparison import compare
from ablate.store.records import Record, combine

DIMS = {  # mnist_cnn_gpu-like labels: the longest the built-in studies make
    "data": ["off", "num_workers(n=4)", "device_resident_data"],
    "precision": ["off", "amp(dtype=bf16)", "half_precision(dtype=bf16)"],
    "graph": ["off", "compile(regional=True)", "compile(mode='max-autotune-no-cudagraphs')"],
    "ckpt": ["off", "activation_checkpointing(every=2)"],
    "attention": ["off", "attention_backend(backend=cudnn)"],
    "opt": ["off", "compiled_optimizer"],
}
SKIP = "AttentionBackend: the cudnn attention kernel is CUDA-only; on a CPU PyTorch has flash and math only"


def _table(energy: bool = False) -> list[dict]:
    measurements = []
    for number, choice in enumerate(itertools.product(*DIMS.values())):
        levels = dict(zip(DIMS, choice))
        label = " + ".join(c for c in choice if c != "off") or BASELINE
        if levels["attention"] != "off":
            measurements.append(Record(number, label, levels, "skipped", reason=SKIP))
            continue
        if levels["data"] == "device_resident_data" and levels["graph"] != "off":
            measurements.append(Record(number, label, levels, "failed", reason="oom: CUDA out of memory"))
            continue
        rate = 1000.0 * (1 + number / 50)
        for block in range(2):
            measurements.append(Record(1000 * block + number, label, levels, "complete", block=block,
                                       accuracy_trained=block == 0,
                                       metrics={"throughput": rate * (1 + block / 100), "throughput_window_0": rate,
                                                "test_accuracy": 98.0 - (number % 7) / 2,
                                                **({"energy_j_per_sample": 2.0 / (1 + number / 50) * (1 + block / 50),
                                                    "energy_counter": 2.0} if energy else {})}))
    return results.rows(compare(combine(measurements), 0.5))


def test_the_default_table_fits_100_columns_with_the_longest_labels_failures_and_skips():
    text = results.render_compact(_table(), tolerance=0.5)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.splitlines()[0].split()[:5] == ["#", "combination", "speed-up", "[95%", "CI]"]
    assert "] below" in text and "] ok" in text  # parity is flagged where it fails and where it holds


def test_an_uncertain_change_past_the_tolerance_reads_probably_below_and_still_fits():
    table = _table()
    row = next(r for r in table if r["parity"] == "below")
    row.update({"parity": "uncertain", "parity high": 0.02, "parity probably below": True})
    text = results.render_compact(table, tolerance=0.5)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "] uncertain, probably below" in text  # the legend, wrapped, says what that means
    assert "probably below where the change itself is under -0.5: never recommended" in " ".join(text.split())


def test_repeated_skip_reasons_are_one_line_and_failures_say_why():
    table = _table()
    text = results.render_compact(table, tolerance=0.5)
    skipped = sum(1 for r in table if r["state"] == "skipped")
    assert text.count("cudnn attention kernel") == 1 and f"{skipped} combinations skipped: AttentionBackend" in text
    assert "combinations failed: oom: CUDA out of memory" in text
    assert not any(line.split()[-1:] == ["skipped"] for line in text.splitlines())  # no row per skip


def test_shortened_labels_read_well_and_never_make_two_combinations_the_same():
    assert short_label("amp(dtype=bf16) + compile(regional=True) + activation_checkpointing(every=2)") \
        == "amp(bf16) + compile(regional) + act_ckpt(2)"
    assert short_label("compile(mode='max-autotune')") == "compile(max-autotune)"
    table = _table()
    shown = [r for r in table if r["state"] != "skipped"]
    assert len({short_label(r["combination"]) for r in shown}) == len(shown)
    text = results.render_compact(table, tolerance=0.5)
    assert "half(bf16) + compile(regional)" in text


def test_labels_fall_back_to_the_full_names_where_shortening_would_confuse_two():
    table = [{"combination": c, "state": "complete", "speed-up": 1.0, "ci low": None, "Δ acc": None, "device": "d",
              "reason": ""} for c in ("compile(fullgraph=True)", "compile(dynamic=True)")]
    for row in table:
        row["ci high"] = None
    assert short_label("compile(fullgraph=True)") != short_label("compile(dynamic=True)")
    confusing = [dict(table[0], combination="amp(dtype=bf16)"), dict(table[0], combination="amp(bf16)")]
    text = results.render_compact(confusing, tolerance=0.5)
    assert "amp(dtype=bf16)" in text


def test_the_full_table_names_the_throughput_unit(tmp_path):
    table = _table()
    assert "tokens/s" in results.render(table, "tokens").splitlines()[0]
    results.write_csv(table, tmp_path / "t.csv", "tokens")
    assert "tokens/s" in (tmp_path / "t.csv").read_text().splitlines()[0]


def test_in_an_80_column_terminal_a_table_of_complete_rows_drops_its_state_column_to_fit():
    complete = [r for r in _table() if r["state"] == "complete"]
    text = results.render_compact(complete, tolerance=0.5, width=79)
    assert max(len(line) for line in text.splitlines()) <= 79
    assert "state" not in text.splitlines()[0] and "Δ acc [95% CI] parity" in text.splitlines()[0]
    assert "state" in results.render_compact(complete, tolerance=0.5).splitlines()[0]  # 100 columns: room for it


def test_where_energy_was_counted_the_default_table_shows_its_ratio_and_still_fits_100_columns():
    table = _table(energy=True)
    text = results.render_compact(table, tolerance=0.5)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.splitlines()[0].split()[-2:] == ["energy", "state"]
    baseline = next(line.split() for line in text.splitlines() if " baseline " in line)
    assert baseline[-2:] == ["x1.00", "complete"]  # the baseline's own ratio, by definition
    assert "energy: joules per sample" in text
    # Where nothing counted it, no column of blanks: the full table says why (tests/render/test_results_table.py).
    assert "energy" not in results.render_compact(_table(), tolerance=0.5)


def test_rows_from_different_numbers_of_blocks_say_how_many_and_still_fit():
    """A whole table: most rows screened once, the raced ones measured in several blocks. A row from one block that
    reads above the answer says it rests on one; a table whose rows all share their blocks has no such column."""
    table = _table()
    assert "blocks" not in results.render_compact(table, tolerance=0.5).splitlines()[0]
    shown = [r for r in table if r["state"] == "complete" and r["speed-up"] is not None and r["blocks"]]
    for i, r in enumerate(shown):
        r["blocks"] = 12 if i % 5 == 0 else 1
    text = results.render_compact(table, tolerance=0.5)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].split()[5] == "blocks"
    ranked = [line for line in lines[2:] if line[:1].isdigit()]
    assert sum(" 12 " in line for line in ranked) == len(shown[::5])
    assert sum(" 1 " in line[5:] for line in ranked) == len(shown) - len(shown[::5])
    assert "blocks: how many blocks a speed-up comes from" in " ".join(text.split())


def test_a_row_that_trains_as_the_baseline_says_so_not_a_zero_interval():
    # num_workers changes no number training computes: its accuracy is the baseline's training, not a measurement.
    measurements = []
    for combination, group, rate, accuracy in (("baseline", BASELINE, 1000.0, 98.0),
                                               ("num_workers(n=4)", BASELINE, 1100.0, 98.0),
                                               ("amp(dtype=bf16)", "amp(dtype=bf16)", 1300.0, 97.9)):
        for block in range(2):
            measurements.append(Record(10 * block + len(measurements), combination, {}, "complete", block=block,
                                       accuracy_group=group, accuracy_trained=block == 0,
                                       metrics={"throughput": rate * (1 + block / 100), "throughput_window_0": rate,
                                                "test_accuracy": accuracy}))
    text = results.render_compact(results.rows(compare(combine(measurements), 0.5)), tolerance=0.5)
    by_label = {line.split()[1]: line for line in text.splitlines()[2:5]}  # "#", then the label
    assert by_label["workers(4)"].rstrip().endswith("same training as baseline  complete")
    assert "reference" in by_label["baseline"] and "[+0.00, +0.00]" not in text
    assert "] ok" in by_label["amp(bf16)"] or "] uncertain" in by_label["amp(bf16)"]  # its own group: measured
    assert "same training as baseline: its techniques change no number training computes" in " ".join(text.split())

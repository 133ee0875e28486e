"""`ablate run` on a tiny study: table, Optuna storage, MLflow runs, resume, accuracy sharing."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import optuna
import pytest
from messages import one_message, unwrapped
from mlflow.tracking import MlflowClient
from structure import comparable, structure

from ablate.cli import main
from ablate.config import study as studies
from ablate.stats.race import finalists
from ablate.stats.speedups import protocol_measurements
from ablate.store.records import load

TINY = Path(__file__).resolve().parents[1] / "studies" / "tiny.yaml"
COMBINATIONS = 8  # 2 workers x 2 pinning x 2 AMP
RUN_ON_CPU = 4  # pinning is skipped without a GPU
SCREENING_BLOCKS = 2  # 3 runnable combinations besides the baseline, in blocks of 2 (tiny.yaml's protocol)


@pytest.fixture(scope="module")
def first_run(tiny_study_run):
    """The session's one run of tiny.yaml on a small CNN (`tiny_study_file`, tests/conftest.py), shared with
    tests/tracking/test_mlflow_view.py: what the tests here change in it (a second run, a rebuilt report) they
    leave as the run left it. Run it again, or report on it, by `tiny_study_file`: its stored hash is that file's."""
    return tiny_study_run[0]


def _optuna(results: Path) -> optuna.Study:
    return optuna.load_study(study_name="tiny:grid:cpu", storage=f"sqlite:///{results / 'tiny' / 'optuna.db'}")


def _runs(results: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ablate/tiny")
    return client, client.search_runs([experiment.experiment_id], max_results=1000)


def _slots(trials) -> list[tuple[str, int]]:
    return [(t.user_attrs["combination"], t.user_attrs["block"], t.user_attrs["position"]) for t in trials]


def test_optuna_storage_has_every_combination_screened_once_and_each_block_its_baseline(first_run):
    trials = _optuna(first_run).get_trials()
    assert len(_slots(trials)) == len(set(_slots(trials)))  # one measurement per planned slot
    screening = [t for t in trials if t.user_attrs["phase"] == "screen"]
    assert len(screening) == COMBINATIONS + 2 * SCREENING_BLOCKS - 1  # every combination once, two baselines a block
    assert len({tuple(sorted(t.params.items())) for t in trials}) == COMBINATIONS
    blocks = {t.user_attrs["block"] for t in trials}
    baseline_group = next(t.user_attrs["accuracy_group"] for t in trials if t.user_attrs["combination"] == "baseline")
    for block in blocks:  # each block has its own baseline, and a random order drawn for it
        members = [t for t in trials if t.user_attrs["block"] == block]
        if block < 0:  # a parity block (one per seed) trains each group once, the baseline's group among them,
            # by whichever member trained it first: num_workers shares the baseline's numerics, so it may stand in.
            # The table's trainings at the first seed take places after any parity's there.
            groups = [t.user_attrs["accuracy_group"] for t in members]
            assert baseline_group in groups and len(groups) == len(set(groups))
            assert len({t.user_attrs["position"] for t in members}) == len(members)
            continue
        assert sorted(t.user_attrs["position"] for t in members) == list(range(len(members)))
        # Two baselines per screening block; one per race or confirmation block.
        baselines = [t.user_attrs["combination"] for t in members].count("baseline")
        assert baselines == (2 if block < SCREENING_BLOCKS else 1)
    race = [t for t in trials if t.user_attrs["phase"] == "race"]
    assert race and {t.user_attrs["block"] for t in race} == {SCREENING_BLOCKS}  # tiny.yaml: one race block
    states = [t.user_attrs["state"] for t in screening]
    assert states.count("complete") == RUN_ON_CPU + 2 * SCREENING_BLOCKS - 1
    skipped = [t for t in trials if t.user_attrs["state"] == "skipped"]
    assert all(t.params["pin_memory"] == "pin_memory" for t in skipped)
    assert all("pinned memory" in t.user_attrs["reason"] for t in skipped)


def test_mlflow_has_a_parent_and_one_child_per_measurement_with_the_pooled_speedup(first_run):
    client, runs = _runs(first_run)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == len(_optuna(first_run).get_trials())
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    complete = [r for r in children if r.data.tags["ablate.state"] == "complete"]
    assert len({r.data.tags["ablate.combination"] for r in complete}) == RUN_ON_CPU
    pooled: dict[str, set] = {}
    # Race first, accuracy only where it decides: a combination whose group was never trained has no accuracy.
    trained = {r.combination for r in load(_optuna(first_run)) if r.accuracy is not None}
    for run in complete:
        assert run.info.status == "FINISHED"
        for metric in ("throughput", "throughput_spread_pct", "first_step_s", "data_wait_fraction",
                       "peak_memory_mb", "speedup"):
            assert metric in run.data.metrics, metric
        if run.data.tags["ablate.combination"] in trained:
            assert {"test_accuracy", "test_loss"} <= set(run.data.metrics)
        assert {"ablate.block", "ablate.phase", "ablate.position"} <= set(run.data.tags)
        pooled.setdefault(run.data.tags["ablate.combination"], set()).add(run.data.metrics["speedup"])
        assert {"dim.amp", "dim.num_workers", "dim.pin_memory"} <= set(run.data.params)
        for tag in ("ablate.device", "ablate.torch", "ablate.commit", "ablate.study_hash"):
            assert run.data.tags[tag]
    assert all(len(values) == 1 for values in pooled.values())  # every measurement shows its combination's estimate
    amp_runs = [r for r in complete if r.data.params["dim.amp"] != "off"]
    assert all(r.data.params["strategy.amp.dtype"] == "bf16" for r in amp_runs)
    skipped = [r for r in children if r.data.tags["ablate.state"] == "skipped"]
    assert len(skipped) == COMBINATIONS - RUN_ON_CPU and all(r.data.tags["ablate.reason"] for r in skipped)
    artifacts = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"tiny.yaml", "grid-cpu.csv"} <= artifacts


def test_accuracy_is_trained_after_screening_and_shared_across_numerics_preserving_strategies(first_run):
    trials = _optuna(first_run).get_trials()
    parity_runs = [t for t in trials if t.user_attrs["phase"] == "parity"]
    # tiny.yaml: seeds 2; the baseline's group and the leader's (race first, accuracy only where it decides: which
    # depends on this machine's throughputs), and a simpler member's only where shown as fast, train at the run's
    # seed and at seed + 1, in parity measurements after the race (Planner.defer_accuracy); a third seed only where
    # still uncertain. With one group to judge, the spread's degrees of freedom come from its seeds (tiny.yaml has
    # no other group to fill it).
    by_seed: dict[int, list[str]] = {}
    for t in parity_runs:
        assert t.user_attrs["accuracy_trained"] and t.user_attrs["block"] == -1 - t.user_attrs["seed_index"]
        by_seed.setdefault(t.user_attrs["seed_index"], []).append(t.user_attrs["accuracy_group"])
    stored = load(_optuna(first_run))
    tiny = studies.load(str(TINY), "cpu")
    final = finalists.final(stored, tiny.accuracy_tolerance, tiny.protocol)
    byc = {r.combination: r for r in stored}
    leader = final.standing.leader
    assert leader is not None
    if finalists.group_of(byc[leader]) == "baseline":  # nothing to judge: the baseline's own accuracy, once
        assert by_seed == {0: ["baseline"]}
    else:
        assert sorted(by_seed[0]) == sorted(by_seed[1])
        assert {"baseline", finalists.group_of(byc[leader])} <= set(by_seed[0])
    assert set(by_seed[0]) <= {"baseline", *(finalists.group_of(byc[c]) for c in final.members)}
    # The whole table: after the answer, each group it did not train trains once, at the run's own seed.
    table_runs = [t for t in trials if t.user_attrs["phase"] == "table"]
    assert all(t.user_attrs["accuracy_trained"] and (t.user_attrs["block"], t.user_attrs["seed_index"]) == (-1, 0)
               and t.number > max(p.number for p in parity_runs) for t in table_runs)
    tabled = [t.user_attrs["accuracy_group"] for t in table_runs]
    assert len(set(tabled)) == len(tabled) and not set(tabled) & set(by_seed[0])
    assert not [t for t in trials if t.user_attrs["phase"] not in ("parity", "table")
                and t.user_attrs.get("accuracy_trained")]
    seeds = {t.user_attrs["training_seed"] - t.user_attrs.get("seed_index", 0) for t in trials
             if "training_seed" in t.user_attrs}
    assert len(seeds) == 1  # one run, one training seed (its parity seeds derived from it)
    first = {t.user_attrs["accuracy_group"]: t for t in [*parity_runs, *table_runs] if t.user_attrs["seed_index"] == 0}
    found = {r.combination: r for r in load(_optuna(first_run))}
    complete = [r for r in found.values() if r.complete]
    assert len(complete) == RUN_ON_CPU
    by_amp: dict[str, list] = {}
    for r in complete:
        by_amp.setdefault(r.levels["amp"], []).append(r)
    for group in by_amp.values():  # each group differs only in NumWorkers, and shares its one first training
        assert len(group) == 2
        donor = first[group[0].accuracy_group]  # every group trained: by the answer, or by the table after it
        for r in group:
            assert r.accuracy == donor.user_attrs["metrics"]["test_accuracy"] and r.accuracy_from == donor.number


def test_the_run_says_where_the_baselines_step_goes_once(tiny_study_run):
    """Once its first measurement is in, within 100 columns (tests/cli/test_diagnose.py checks what it says)."""
    said = [line for line in tiny_study_run[1].splitlines() if line.startswith("baseline's step (")]
    assert len(said) == 1 and len(said[0]) <= 100, tiny_study_run[1]


STATISTICS = ("fraction", "resolution", "alias", "studentized", "alpha", "contrast", "fold-over", "tost")


def test_the_report_defines_its_verdict_words_after_its_answer_before_its_method(first_run):
    report = (first_run / "tiny" / "report" / "grid" / "report.md").read_text()
    words = report.index("## What the words mean")
    assert report.index("## The answer") < words < report.index("## How this was measured")
    assert "- **ok**: " in report[words:]


def test_the_run_opens_in_plain_words_what_runs_the_plan_and_the_cost(tiny_study_run):
    """A practitioner's header: what runs here, the plan, the expected cost, one line each; no statistics term
    before the first measurement (the method is behind --explain)."""
    before = [line for line in unwrapped(tiny_study_run[1].split("\n#", 1)[0])  # up to the first measurement
              if " measured [" not in line]  # the progress bar's first line is no part of the header
    assert [line.split(":")[0] for line in before[:3]] == ["tiny", "plan", "expected cost"], before
    assert not [line for line in before if any(term in line.lower() for term in STATISTICS)], before
    assert "measure all" in before[1] and "race the fastest 2" in before[1] and "each group's accuracy" in before[1]


def _address(line: str) -> bool:
    """A path or a URL on a line of its own: one word, never wrapped, so that a terminal copies it whole."""
    word = line.strip()
    return " " not in word and ("/" in word or "://" in word)


def test_a_log_of_the_run_keeps_to_100_columns_without_carriage_returns(tiny_study_run):
    """What `ablate run ... > run.log 2>&1` leaves with COLUMNS unset (tests/conftest.py unsets it): every line within
    100 columns but an address alone on its line, the header wrapped, the progress a plain line now and then."""
    log = tiny_study_run[1]
    assert "\r" not in log
    lines = log.splitlines()
    assert [line for line in lines if len(line) > 100 and not _address(line)] == [], log
    header = unwrapped(log)  # its first line wraps or not with the CPU model's name
    assert " of its 8 combinations run on " in header[0] and header[1].startswith("plan: ")
    progress = [line for line in lines if " measured [" in line]
    assert all(re.fullmatch(r"\d+ measured \[.*\]", line) for line in progress), progress
    assert all(" more" in line for line in progress[1:-1]), progress  # what is left, never a total queued so far
    done = re.match(r"\d+", progress[-1]).group()  # the last one: every measurement in, nothing said left
    assert " more" not in progress[-1] and int(done) > RUN_ON_CPU, progress


def test_second_run_runs_nothing_new(first_run, tiny_study_file, capsys):
    before = len(_runs(first_run)[1])
    assert main(["run", str(tiny_study_file), "--device", "cpu", "--results", str(first_run)]) == 0
    out = capsys.readouterr().out
    assert "nothing to run" in out and "baseline" in out
    assert len(_runs(first_run)[1]) == before


def test_table_is_sorted_by_speedup_and_agrees_with_summary_json_the_report_and_mlflow(first_run):
    """One comparison per combination (ablate.stats.answer.comparison), rendered by every surface: the CSV,
    summary.json, the report's table and the MLflow rows agree row by row, and a row's throughput is the baseline's
    times its speed-up."""
    import csv
    import json

    rows = list(csv.DictReader((first_run / "tiny" / "grid-cpu.csv").open()))
    speedups = [float(r["speed-up"]) for r in rows if r["speed-up"]]
    assert speedups == sorted(speedups, reverse=True) and len(speedups) == RUN_ON_CPU
    baseline = next(r for r in rows if r["combination"] == "baseline")
    assert float(baseline["speed-up"]) == 1.0
    summary = json.loads((first_run / "tiny" / "report" / "grid" / "summary.json").read_text())
    by_name = {s["combination"]: s for s in summary["speedups"]}
    report = (first_run / "tiny" / "report" / "grid" / "report.md").read_text()
    report_rows = {cells[0]: cells for line in report.splitlines() if line.startswith("| ")
                   and len(cells := [c.strip() for c in line.strip("|").split("|")]) >= 10}
    _, runs = _runs(first_run)
    mlflow_rows = {r.data.tags["mlflow.runName"]: r for r in runs if r.data.tags.get("ablate.row") == "combination"}
    base_rate = float(baseline["samples/s"])
    assert set(by_name) == {r["combination"] for r in rows if r["speed-up"]} == {
        name for name, run in mlflow_rows.items() if "speedup" in run.data.metrics}  # skipped ones have none
    for row in rows:  # one comparison on every surface
        if not row["speed-up"]:
            continue
        name, speedup, rate = row["combination"], float(row["speed-up"]), float(row["samples/s"])
        entry, cells, run = by_name[name], report_rows[name], mlflow_rows[name]
        assert rate / base_rate == pytest.approx(speedup, rel=1e-9)  # the one definition of a row's throughput
        assert entry["speedup"] == pytest.approx(speedup) and entry["throughput"] == pytest.approx(rate)
        assert run.data.metrics["speedup"] == pytest.approx(speedup)
        assert cells[1] == f"{rate:.0f}" and cells[2].startswith(f"x{speedup:.2f}")
        assert run.data.tags["speed-up"].startswith(f"x{speedup:.2f}")
        if name != "baseline":
            assert entry["low"] <= entry["speedup"] <= entry["high"] and entry["blocks"] >= 1
            assert float(row["ci low"]) == pytest.approx(entry["low"]) == pytest.approx(run.data.metrics["speedup_low"])
            assert int(row["blocks"]) == entry["blocks"] == int(cells[3])
        if row["Δ acc"]:
            change = float(row["Δ acc"])
            assert (entry["accuracy_change"] == pytest.approx(change)
                    == pytest.approx(run.data.metrics["accuracy_change"]))
            assert cells[6] == f"{change:+.2f}" and row["parity"] == entry["parity"]["verdict"]
    assert summary["recommendation"]["combination"] in by_name and summary["recommendation"]["compose"]
    assert summary["recommendation"]["set"]
    assert summary["recommendation"]["leader"] == summary["recommendation"]["combination"]
    assert set(summary["seeds"]) == {"protocol", "training"}
    assert all(s["parity"]["verdict"] in ("ok", "below", "uncertain") for s in summary["speedups"] if s["parity"])
    assert summary["device"] and summary["torch"] and summary["commit"]


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_the_report_renders_and_is_attached_to_the_parent_run(first_run):
    import matplotlib.image

    folder = first_run / "tiny" / "report" / "grid"
    text = (folder / "report.md").read_text()
    assert text.startswith("# ablate report: tiny (grid) on ")
    assert "stack = compose(" in text and "## Accuracy parity" in text
    html = (folder / "report.html").read_text()
    # Self-contained: the speed-ups, the effects, the Pareto front and where each step's time goes (the run profiles).
    assert html.count("data:image/png;base64,") == 4 and 'src="speedup.png"' not in html
    assert 'src="phases.png"' not in html
    for name in ("speedup.png", "effects.png", "pareto.png", "phases.png"):
        data = (folder / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        assert matplotlib.image.imread(folder / name).shape[2] in (3, 4)  # decodes as an image
    client, runs = _runs(first_run)
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    attached = {a.path for a in client.list_artifacts(parent.info.run_id, "report/grid")}
    assert {"report/grid/report.md", "report/grid/report.html", "report/grid/pareto.png",
            "report/grid/summary.json"} <= attached
    assert "parity_failures" in parent.data.metrics


def test_report_command_rebuilds_from_stored_trials_without_running(first_run, tiny_study_file, capsys):
    before = len(_optuna(first_run).get_trials())
    table = first_run / "tiny" / "grid-cpu.csv"
    written = table.read_text()
    (first_run / "tiny" / "report" / "grid" / "report.md").unlink()
    table.unlink()  # as after a study stopped before its end (a time limit in `make gpu`): the table too
    assert main(["report", str(tiny_study_file), "--device", "cpu", "--results", str(first_run)]) == 0
    assert "recommended:" in capsys.readouterr().out
    assert (first_run / "tiny" / "report" / "grid" / "report.md").exists() and table.read_text() == written
    assert len(_optuna(first_run).get_trials()) == before


def test_report_on_a_study_with_no_trials_is_one_clear_line(tmp_path, capsys):
    assert main(["report", str(TINY), "--device", "cpu", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    said = one_message(err)  # one message, wrapped at 100 columns
    assert "no stored trials for tiny:grid:cpu" in said and "ablate run" in said
    assert not any(tmp_path.iterdir())  # nothing written


def test_time_to_accuracy_is_in_mlflow_and_in_the_table(first_run):
    import csv

    client, runs = _runs(first_run)
    trained = [r for r in runs if r.data.tags.get("ablate.state") == "complete"
               and r.data.tags.get("ablate.accuracy_from") == r.data.tags.get("ablate.trial_number")
               and r.data.tags.get("ablate.block") == "-1"]  # the run's own seed, trained after screening
    groups = {t.user_attrs["accuracy_group"] for t in _optuna(first_run).get_trials()
              if t.user_attrs["phase"] in ("parity", "table") and t.user_attrs["seed_index"] == 0}
    assert len(trained) == len(groups) == 2  # one per AMP setting (the answer's, then the table's) at the own seed
    for run in trained:
        m = run.data.metrics
        assert m["target_accuracy"] == 99.0 and m["target_reached"] == 0.0 and m["evaluations"] == 2
        assert m["one_off_s"] >= m["first_step_s"] > 0
    rows = list(csv.DictReader((first_run / "tiny" / "grid-cpu.csv").open()))
    assert sorted(r["to target s"] for r in rows if r["state"] == "complete") == \
        [""] * (RUN_ON_CPU - len(groups)) + ["not reached"] * len(groups)


def test_no_interpreter_imported_while_a_trial_measured(first_run):
    from ablate.trial.interpreters import overlaps

    timelines = [t.user_attrs["timeline"] for t in _optuna(first_run).get_trials() if "timeline" in t.user_attrs]
    assert len(timelines) >= RUN_ON_CPU + 2 * SCREENING_BLOCKS - 1  # every complete measurement has one
    imports = [tuple(span) for t in timelines for span in t["imports"]]
    measured = [tuple(span) for t in timelines for span in t["measured"]]
    # Every measurement's interpreter was imported (the first cold, the rest ahead), and none beside a measured span.
    assert len(imports) >= len(timelines) and len(measured) >= len(timelines)
    assert overlaps(imports, measured) == []


def _names(shape: Any, prefix: str = "") -> set[str]:
    """Every name in a `structure` shape, as path:name ("summary.json:keys:recommendation.members")."""
    if isinstance(shape, dict):
        return set().union(*(_names(v, f"{prefix}{k}:") for k, v in shape.items())) if shape else set()
    return {f"{prefix}{name}" for name in shape}


PHASES = ("data", "copy", "forward", "backward", "optimizer", "other")  # a step's phases, as ablate/trial/metrics.py
# What changed on purpose since 46e5984, name by name: a script reading the old names finds all but REMOVED.
ADDED = {
    # Measurements: the load guard (ablate.trial.foreign_load) over the timed windows; how many attempts were discarded.
    *(f"{where}:{m}" for where in ("mlflow.db:measurement:metrics", "tiny/optuna.db:trial_metrics")
      for m in ("foreign_cores", "steal_cores", "remeasured")),
    *(f"mlflow.db:parent:metrics:load.{m}" for m in ("measurements", "most_foreign_cores", "taken_again",
                                                      "still_disturbed")),
    # summary.json: the recommendation as one object per member, each decision with the interval that made it.
    *(f"tiny/report/grid/summary.json:keys:{k}" for k in (
        "machine_load", "machine_load.foreign_load_limit", "machine_load.measurements", "machine_load.taken_again",
        "machine_load.still_disturbed", "machine_load.most_foreign_cores", "protocol.equivalence_margin",
        "protocol.foreign_load_limit", "protocol.remeasure", "protocol.extra_race_blocks", "protocol.warm_up_trials",
        "recommendation.accuracy_unmeasured", "speedups.[].accuracy_unmeasured",  # race first: not a finalist
        "recommendation.eliminated", "recommendation.equivalence_margin", "recommendation.members",
        "recommendation.not_raced", "recommendation.leader_unconfirmed")),
    # Where a step's time goes (issue 40): each measurement's profiling window (ablate.trial.phases), then the study's
    # diagnosis (ablate.stats.answer.explained) in summary.json and the parent run, and energy per sample on every
    # surface.
    *(f"{where}:{m}" for where in ("mlflow.db:measurement:metrics", "mlflow.db:row:metrics",
                                   "tiny/optuna.db:trial_metrics")
      for m in ("profiled_step_s", "profiled_steps",  # no profile_cost: a CPU profiles its windows (phases.in_windows)
                *(f"phase_{kind}_{p}" for kind in ("s", "share") for p in PHASES))),
    *(f"mlflow.db:{kind}:tags:energy per sample" for kind in ("measurement", "row")),
    *(f"tiny/grid-cpu.csv:columns:{c}" for c in ("energy/sample", "energy low", "energy high")),
    *(f"mlflow.db:parent:metrics:{m}" for m in (
        *(f"diagnosis.baseline.share.{p}" for p in PHASES),
        *(f"diagnosis.ceiling.{t}" for t in ("num_workers_n_1", "pin_memory", "amp_dtype_bf16")))),
    *(f"tiny/report/grid/summary.json:keys:{k}" for k in (
        "diagnosis", "diagnosis.profiled", "diagnosis.baseline", "diagnosis.baseline.phase_shares",
        "diagnosis.baseline.gpu_idle_share", "diagnosis.baseline.profiled_step_s", "diagnosis.baseline.profile_cost",
        "diagnosis.unlikely_below", "diagnosis.recommended", "diagnosis.techniques",
        *(f"diagnosis.techniques.[].{f}" for f in ("technique", "targets", "share", "ceiling", "unlikely", "alone",
                                                   "low", "high", "check", "sentence")),
        *(f"diagnosis.baseline.phase_shares.{p}" for p in PHASES),
        *(f"{entry}.{f}" for entry in ("speedups.[]", "recommendation")
          for f in ("energy_ratio", "energy_low", "energy_high", "phase_shares",
                    *(f"phase_shares.{p}" for p in PHASES))))),
    # An `uncertain` parity whose change itself is past the tolerance: probably below, never raced or recommended.
    "tiny/grid-cpu.csv:columns:parity probably below",
    # A row whose accuracy is the baseline's training (or the baseline itself): what its accuracy cells say instead.
    "tiny/grid-cpu.csv:columns:same training",
    *(f"tiny/report/grid/summary.json:keys:{k}.parity.probably_below" for k in ("recommendation", "speedups.[]")),
    # Versions for what scripts and newer code read (docs/api.md): summary.json's fields, the stored format.
    "tiny/report/grid/summary.json:keys:schema_version", "tiny/optuna.db:study_user_attrs:format_version",
    # Evaluation sized to the decision (ablate.workload.evaluation): the split's size and the sampling error's bound.
    *(f"{where}:{m}" for where in ("mlflow.db:measurement:metrics", "mlflow.db:row:metrics",
                                   "tiny/optuna.db:trial_metrics")
      for m in ("test_split_samples", "test_sampling_error")),
    # The parity verdict as a number beside its tag (ablate.tracking.view), to sort and filter the grid on in MLflow.
    *(f"mlflow.db:{kind}:metrics:parity_verdict" for kind in ("measurement", "row")),
    # The profiling window once per combination: whether a measurement asked for it (ablate.run.objective).
    "tiny/optuna.db:trial_user_attrs:profiling",
    # What a study costs (ablate.run.estimate): the estimate said as it began, its first in minutes, and the actual.
    "tiny/optuna.db:study_user_attrs:cost",
    # A plan being queued, cleared once queued (ablate.store.plan): a kill part-way leaves it for the resume.
    "tiny/optuna.db:study_user_attrs:pending_plan",
    # The study's end in MLflow, due until the parent run holds it (ablate.tracking.parent_run): a kill part-way
    # leaves it due for the next run or `ablate sync`.
    "tiny/optuna.db:study_user_attrs:end",
    *(f"tiny/report/grid/summary.json:keys:cost{k}" for k in (
        "", ".estimate", ".estimate.measurements", ".estimate.accuracy_trainings", ".estimate.by_phase",
        *(f".estimate.by_phase.{p}" for p in ("screen", "race", "parity", "confirm", "table")), ".estimate.quick",
        ".minutes_estimate", ".minutes_estimate.after_measurements", ".minutes_estimate.minutes", ".actual",
        *(f".actual.{f}" for f in ("wall_s", "minutes", "sessions", "measurements", "accuracy_trainings")))),
    # The margin the design's equivalence test could show, and what a headline simpler than its leader leaves out.
    *(f"tiny/report/grid/summary.json:keys:recommendation.{k}" for k in (
        "equivalence_design", "equivalence_design.smallest_shown", "equivalence_design.blocks",
        "equivalence_design.blocks_for_margin", "equivalence_design.margin_below_smallest", "left_out",
        "left_out.techniques", "left_out.may_cost_up_to")),
    # Which design ran (the whole table, --quick's, the single pass...) and the setting that chooses it.
    "tiny/report/grid/summary.json:keys:protocol.design", "tiny/report/grid/summary.json:keys:protocol.quick",
    # The fraction of the grid screening measured (null where it measured every runnable combination).
    *(f"tiny/report/grid/summary.json:keys:protocol.screened_fraction{k}" for k in (
        "", ".cells", ".of", ".generators", ".resolution", ".fold_over")),
    # The environment a change between two studies sets side by side (ablate compare): the stored machine's new fields.
    *(f"mlflow.db:{kind}:tags:ablate.{f}" for kind in ("measurement", "row", "parent")
      for f in ("python", "threads", "cuda", "cudnn", "driver", "gpu_uuid")),
    # ... and in summary.json: the machine and the workload (their fields are the stored machine's and the study
    # schema's: OPEN below), the baseline's own level, the MLflow parent run.
    *(f"tiny/report/grid/summary.json:keys:{k}" for k in (
        "machine", "workload", "mlflow_parent_run", "baseline_level",
        *(f"baseline_level.{f}" for f in ("throughput", "log", "log_se", "df", "blocks")))),
}
REMOVED: set[str] = set()
# Names under these prefixes are data (a member's entry, a decision's fields), their presence the outcome's.
OPEN = ("tiny/report/grid/summary.json:keys:recommendation.members.", "tiny/report/grid/summary.json:keys:"
        "recommendation.eliminated.", "tiny/report/grid/summary.json:keys:recommendation.not_raced.",
        "tiny/report/grid/summary.json:keys:recommendation.contrasts.", "tiny/report/grid/summary.json:keys:machine.",
        "tiny/report/grid/summary.json:keys:workload.")


def test_the_run_leaves_the_structure_it_left_before_the_move(first_run):
    """Table columns, summary.json keys, stored attrs and MLflow params, metrics and tags, as at 46e5984 (before
    ablate/ was split into packages: tests/support/before_the_move/structure.json), but for the names added or
    removed on purpose (ADDED, REMOVED): nothing a script read disappears by accident, nothing appears undeclared."""
    before = comparable(json.loads((TINY.parents[1] / "support" / "before_the_move" / "structure.json").read_text()))
    now = comparable(structure(first_run))
    assert sorted(now) == sorted(before)
    old, new = _names(before), _names(now)
    assert old - new == REMOVED, sorted(old - new)
    assert {n for n in new - old if not n.startswith(OPEN)} <= ADDED, sorted(new - old - ADDED)


def test_summary_json_carries_the_machine_the_workload_and_the_baselines_own_level(first_run):
    """What comparing two studies needs (issue 50): every machine field as the measurements stored it, the workload's
    settings, and the baseline's level with its standard error across blocks."""
    written = json.loads((first_run / "tiny" / "report" / "grid" / "summary.json").read_text())
    assert written["workload"]["model"] and written["workload"]["budget"]["train_samples"] > 0
    assert "seed" not in written["workload"]["budget"]  # a run's own draw: not what is measured
    assert {"python", "threads", "torch", "commit", "cuda", "cudnn", "driver", "gpu_uuid"} <= set(written["machine"])
    assert written["machine"]["driver"] == "none"  # a CPU study: no GPU behind it
    level = written["baseline_level"]
    blocks = {m.block for m in protocol_measurements(load(_optuna(first_run))) if m.combination == "baseline"}
    assert level["blocks"] == len(blocks) >= 2 and level["df"] == level["blocks"] - 1 and level["log_se"] > 0
    assert math.exp(level["log"]) == pytest.approx(level["throughput"])

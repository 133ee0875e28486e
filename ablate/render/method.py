"""The report's closing section, "How this was measured": the device and the code, the study file and its budget, the
trials, the protocol the run followed, the host's noise, the compile cache, the seeds, and how a speed-up and an
accuracy change are estimated.

A section of its own because the report answers first and explains its method last: the answer
(`ablate.render.report`) and the method share only the findings they render (`ablate.stats.answer.findings`).
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

from ablate.config.study import Study
from ablate.stats.answer.findings import Findings
from ablate.store import seeds
from ablate.store.study_record import StudyRecord
from ablate.trial.process import BASELINE_FP32
from ablate.words import count

TITLE = "How this was measured"  # the answer's first lines link to it (#how-this-was-measured)
# Written down because it decides whether a compiled combination could get faster only by running later.
CACHES = ("Each measurement runs in a fresh process. Combinations that compile the same graph (differing only in "
          "workers, pinning or set_to_none) share one Inductor cache: a measurement is warm where Inductor's "
          "counters report every lookup a hit, else cold; which sibling compiles first falls to the randomized block "
          "order, and it changes only the one-off cost (the timed windows follow compilation and warm-up; a hit is "
          "the same code), which a warm combination takes from a cold sibling (named in the break-even table). "
          "Autotuning modes compile cold every time (ablate/trial/compile_cache.py). Datasets are decoded once and "
          "memory-mapped by every trial: start-up only, outside the timed windows.")
SPEEDUPS = (
    "Each measurement is one fresh process. A combination's speed-up is the geometric mean, over the blocks "
    "it ran in, of its throughput divided by the same block's baseline's (paired, so drift and a lucky "
    "baseline cancel). The leader's estimate (and the simplest member's of its set) comes from confirmation "
    "blocks, which no selection saw; another raced combination's comes from the race blocks that also "
    "decided whether it stayed in the race, so one kept may read high and one dropped low. The 95% t "
    "interval rests on between-process noise: "
    "a variance model by technique fitted to the spread of the paired differences of the combinations "
    "measured in several blocks and of the two baselines within each screening block (\"model\"; pooled "
    "when too few: \"paired\", or \"baseline\" when the baselines are the only source); for a "
    "combination measured in several blocks, combined with its own spread across them (\"moderated\"), or "
    "its own alone where that is clearly wider (\"own\"). A row read once, in a study that races, shows "
    "the screening model's estimate instead (\"screening model\"): the model fitted to every screened reading, "
    "so the top of the table is not its luckiest single processes. A row's throughput is the "
    "baseline's (the geometric mean of its measurements) times the row's speed-up, so the two columns agree.")
ACCURACY = ("Accuracy was trained once per seed per group of combinations that differ only in techniques that leave "
            "the numbers unchanged (\"acc from\" names the trial of the run's own seed); Δ acc is the mean paired "
            "change over the group's seeds (see Accuracy parity).")


def section(study: Study, found: Findings) -> list[str]:
    """The section's lines, its heading first."""
    records, device, study_record = found.records, found.device, found.study_record
    states = Counter(r.state for r in records)
    machines = {k: sorted({r.machine[k] for r in records}) for k in ("torch", "commit", "host")}
    cv = found.baseline_cv
    return [
        f"## {TITLE}", "",
        f"- Device: **{device}**; torch {', '.join(machines['torch'])}; commit {', '.join(machines['commit'])}; "
        f"host {', '.join(machines['host'])}",
        f"- Study file: `{study.path.name}` (hash {study.file_hash}); model `{study.model}`, "
        f"dataset `{study.dataset}`; "
        + ("budget: throughput only (budget.throughput_only), " if study.budget.throughput_only else
           f"budget {study.budget.train_samples:,} training {_samples(study)} for accuracy, ")
        + f"{study.budget.describe_windows(found.device_type)}; "
        f"throughput in {study.throughput_unit}/s",
        f"- Trials: {count(len(records), 'combination')}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        + f"; {count(sum(len([m for m in r.measurements if m.complete]) for r in records), 'throughput measurement')} "
        f"in {count(len({m.block for r in records for m in r.measurements}), 'block')}",
        f"- Design: {DESIGNS.get(found.protocol.design, found.protocol.design)}.",
        f"- Protocol: {found.protocol.describe(fraction=_fraction(found))}. "
        + (f"Race: {study_record.race['why']}." if study_record.race else ""),
        f"- Host noise: the baseline's throughput varied by {100 * cv:.1f}% (coefficient of variation) across "
        f"blocks" if cv is not None else "- Host noise: the baseline ran in one block only, so its variation across "
        "blocks is unknown",
        f"- Compile cache: {CACHES}",
        *_bitwise_lines(study_record, device),
        f"- Baseline fp32 precision: strict IEEE for matmuls and convolutions (`{BASELINE_FP32}`; on CUDA, TF32 "
        "only where the TF32 strategy is on).",
        f"- Written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `ablate report` from the stored trials.",
        "",
        *([f"Seeds of this run: {seeds.describe(study_record.seeds)} (parity's extra seeds: the training seed plus 1, "
           "2...).", ""] if study_record.seeds else []),
        SPEEDUPS, "", ACCURACY, "",
    ]


DESIGNS = {"whole table": "the whole table, every runnable combination measured (the default)",
           "quick": "quick, only what the answer needs: a fraction of the grid where one fits, accuracy for the final "
                    "set only (`--quick`)",
           "single pass": "the single pass, every combination once against one baseline (`--single-pass`)"}


def _fraction(found: Findings) -> str | None:
    """The fraction of the grid screening measured (None: all of it), and whether the fold-over followed."""
    part = found.compared.fraction_first
    if part is None:
        return None
    return part.fraction.describe() + (" (then the fold-over: every other one)" if part.folded else "")


def _samples(study: Study) -> str:
    per = study.task.units_per_sample
    return f"sequences of {per:,} tokens" if study.throughput_unit == "tokens" else "samples"


def _bitwise_lines(study_record: StudyRecord, device: str) -> list[str]:
    """Which accuracy groups trained as another because they computed bitwise alike here (`ablate.run.bitwise`)."""
    answers = study_record.bitwise.get(device)
    if not answers:
        return []
    said = [f"**{group}** trained as {trains_as}" if trains_as != group else f"{group} trained apart"
            for group, (trains_as, _) in sorted(answers.items())]
    why = [f"{group}: {reason}" for group, (_, reason) in sorted(answers.items())]
    return [f"- Accuracy groups, checked for bitwise equality with their core before measuring (`ablate.run.bitwise`): "
            f"{'; '.join(said)}. Found: {'; '.join(why)}."]

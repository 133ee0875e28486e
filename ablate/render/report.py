"""The study report: Markdown plus a self-contained HTML page with the plots embedded.

Built from stored trials only (`ablate report` runs nothing). Trials from
different devices are never mixed: each device gets its own report.
"""
from __future__ import annotations

import base64
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import markdown

from ablate.config.choices import BASELINE
from ablate.config.study import Study
from ablate.render import answer, effects, explained, plots, summaries, terminal
from ablate.render.results import NOT_COUNTED
from ablate.stats import analysis, parity, protocol
from ablate.stats.analysis import BreakEven, EffectFit, Interval, Speedup
from ablate.stats.comparison import Comparison, DeviceComparisons, followed
from ablate.stats.explained import Diagnosis, diagnose
from ablate.store import seeds
from ablate.store.records import Record, baseline
from ablate.store.study_record import StudyRecord
from ablate.trial import metrics as metric
from ablate.trial.mfu import peak
from ablate.trial.process import BASELINE_FP32
from ablate.words import count, factor, interval, points

NO_BASELINE = "the baseline did not complete, and every speed-up is a ratio to it"
ALL_BELOW = "no combination the race could judge"

@dataclass
class Report:
    device: str
    folder: Path
    markdown: Path
    html: Path
    summary_json: Path
    plots: list[Path]
    recommended: Record | None  # the race's leader, or the simpler member shown equivalent to it
    compose: tuple[str, str] | None  # for `recommended`
    metrics: dict[str, float] = field(default_factory=dict)
    seeds: Mapping[str, int] | None = None
    leader: str | None = None  # the race's leader (the set's fastest)
    members: tuple[str, ...] = ()  # the race's set, simplest first
    lines: tuple[str, ...] = ()  # the rest of the answer, a name per line (`answer.terminal_lines`)
    why_none: str = NO_BASELINE  # without a recommendation: why
    moved: str | None = None  # where the recommended stack's time went (`explained.terminal_line`)

    def summary(self) -> str:
        lines = [terminal.addressed(f"report ({self.device})", self.html),
                 terminal.addressed("summary for scripts", self.summary_json)]
        if self.seeds:
            lines.append(f"seeds: {seeds.describe(self.seeds)}")
        if self.recommended:
            m = self.metrics
            shown = "recommended.speedup.low" in m and self.recommended.combination != BASELINE
            speedup = factor(m.get("recommended.speedup", float("nan")), m.get("recommended.speedup.low"),
                             m.get("recommended.speedup.high")) if shown else \
                factor(m.get("recommended.speedup", float("nan")))
            lines.append(terminal.message(f"recommended: {self.recommended.combination} ({speedup}"
                                          + (f" (95%, {count(m['recommended.blocks'], 'block')})" if shown else "")
                                          + " the baseline's throughput)", indent="    "))
            lines += [f"  {line}" for line in (*(self.compose or ()), *self.lines, *filter(None, [self.moved]))]
        else:
            lines.append(terminal.message(f"recommended: none ({self.why_none})"))
        return "\n".join(lines)


# Written down because it decides whether a compiled combination could get faster only by running later.
CACHES = ("Each measurement runs in a fresh process. Combinations that compile the same graph (differing only in "
          "workers, pinning or set_to_none) share one Inductor cache: a measurement is warm where Inductor's "
          "counters report every lookup a hit, else cold; which sibling compiles first falls to the randomized block "
          "order, and it changes only the one-off cost (the timed windows follow compilation and warm-up; a hit is "
          "the same code), which a warm combination takes from a cold sibling (named in the break-even table). "
          "Autotuning modes compile cold every time (ablate/trial/compile_cache.py). Datasets are decoded once and "
          "memory-mapped by every trial: start-up only, outside the timed windows.")
MEMORY = {
    "cuda": "Peak MB: the most device memory PyTorch's caching allocator reserved during the timed windows "
            "(torch.cuda.max_memory_reserved; compilation, warm-up and evaluations left out), CUDA-graph pools "
            "included; then, as \"allocated\", the most its tensors held (max_memory_allocated). The reserved figure "
            "is the one compared: a CUDA-graph replay (cuda_graphs, compile in reduce-overhead or max-autotune mode) "
            "runs in a private pool the allocated figure leaves out, so allocated would show graphs as a saving.",
    "cpu": "Peak MB: the trial process's peak resident set size during the timed windows (evaluations left out). "
           "It includes the interpreter, torch and the data, so a saving in activations reads smaller than on a GPU, "
           "where only tensors count; DataLoader workers' own processes are not in it.",
}
ENERGY_NOTE = ("joules per sample over the timed windows (RAPL on a CPU, NVML on a GPU), over the same block's "
               "baseline's, paired as a speed-up is; below x1: less energy per sample")
NO_COUNTER = " (no measurement could read a RAPL or NVML energy counter)"
NOISY_CV = 0.10  # a baseline that moves by more than 10% between blocks on the log scale: say so


def build(study: Study, compared: list[DeviceComparisons], search: str, folder: Path,
          race: StudyRecord | None = None) -> list[Report]:
    """One report per device the study's trials ran on, written under `folder`."""
    return [_build_one(study, d, search, folder / (f"{search}-{_slug(d.device)}" if len(compared) > 1 else search),
                       race or StudyRecord()) for d in compared]


def _build_one(study: Study, compared: DeviceComparisons, search: str, folder: Path, race: StudyRecord) -> Report:
    folder.mkdir(parents=True, exist_ok=True)
    records, device, rec = compared.records, compared.device, compared.recommendation
    dims = [d for d, _ in study.space]
    numeric_dims = [d for d, opts in study.space if any(o.changes_numerics for o in opts)]
    throughput = analysis.fit_effects(analysis.throughput_observations(records), dims, "log throughput")
    accuracy = analysis.fit_effects(analysis.accuracy_observations(records), numeric_dims, "test accuracy")
    picked = rec.pick.number if rec else None
    compose = analysis.compose_line(rec.pick, study) if rec else None
    breaks = analysis.break_even(records, study, compared.speedup_of)
    title = f"{study.name} ({search}) on {device}"
    diagnosed = diagnose(study, compared)
    pick = rec.pick.combination if rec else None

    figures = [
        plots.speedup_chart(folder / "speedup.png", compared, picked, title),
        plots.effects_chart(folder / "effects.png", throughput, accuracy, title),
        plots.pareto_chart(folder / "pareto.png", compared, picked, title, study.throughput_unit),
    ]
    (folder / explained.FIGURE).unlink(missing_ok=True)  # an earlier report's picture must not outlive its data
    if diagnosed.profiled:
        figures.append(plots.phases_chart(folder / explained.FIGURE, diagnosed, pick, title))
    cv = protocol.baseline_cv(analysis.protocol_measurements(records), BASELINE)
    text = _markdown(study, compared, search, throughput, accuracy, numeric_dims, compose, breaks, cv, race,
                     diagnosed)
    md = folder / "report.md"
    md.write_text(text)
    html = folder / "report.html"
    html.write_text(_html(text, figures, title))
    summary = folder / "summary.json"
    summary.write_text(json.dumps(summaries.summary(study, compared, search, cv, followed(study, race), race,
                                                    diagnosed), indent=2) + "\n")
    return Report(device, folder, md, html, summary, figures, rec.pick if rec else None, compose,
                  {**_metrics(compared, throughput, accuracy, cv), **explained.metrics(diagnosed)},
                  race.seeds, rec.leader.combination if rec else None,
                  tuple(m.combination for m in rec.members) if rec else (),
                  tuple(answer.terminal_lines(rec, compared.speedup_of)) if rec else (), _why_none(records),
                  explained.terminal_line(diagnosed, pick))


def _why_none(records: list[Record]) -> str:
    """Why there is no recommendation: no complete baseline (it is always a candidate otherwise)."""
    return NO_BASELINE if baseline(records) is None else ALL_BELOW


def _fraction(compared: DeviceComparisons) -> str | None:
    """The fraction of the grid screening measured (None: all of it), and whether the fold-over followed."""
    part = compared.screened
    if part is None:
        return None
    return part.fraction.describe() + (" (then the fold-over: every other one)" if part.folded else "")


def _samples(study: Study) -> str:
    per = study.task.units_per_sample
    return f"sequences of {per:,} tokens" if study.throughput_unit == "tokens" else "samples"


def _memory(c: Comparison, base: Comparison | None) -> str:
    """Peak memory, and its change from the baseline's (what activation checkpointing is for)."""
    mine, theirs = c.peak_memory_mb, base.peak_memory_mb if base else None
    if mine is None:
        return ""
    allocated = c.record.metrics.get(metric.PEAK_MEMORY_ALLOCATED_MB)  # CUDA: the table's figure is the reserved one
    also = "" if allocated is None else f"; allocated {allocated:,.0f}"
    if not theirs or c.is_baseline:
        return f"{mine:,.0f}{also}"
    return f"{mine:,.0f} ({100 * (mine / theirs - 1):+.0f}%){also}"


def _bitwise_lines(stored: StudyRecord, device: str) -> list[str]:
    """Which accuracy groups trained as another because they computed bitwise alike here (`ablate.run.bitwise`)."""
    answers = stored.bitwise.get(device)
    if not answers:
        return []
    said = [f"**{group}** trained as {trains_as}" if trains_as != group else f"{group} trained apart"
            for group, (trains_as, _) in sorted(answers.items())]
    why = [f"{group}: {reason}" for group, (_, reason) in sorted(answers.items())]
    return [f"- Accuracy groups, checked for bitwise equality with their core before measuring (`ablate.run.bitwise`): "
            f"{'; '.join(said)}. Found: {'; '.join(why)}."]


def _markdown(study: Study, compared: DeviceComparisons, search: str, throughput: EffectFit | str,
              accuracy: EffectFit | str, numeric_dims: list[str], compose: tuple[str, str] | None,
              breaks: list[BreakEven], cv: float | None, stored: StudyRecord, diagnosed: Diagnosis) -> str:
    records, device, rec = compared.records, compared.device, compared.recommendation
    base = baseline(records)
    states = Counter(r.state for r in records)
    mfu = peak(device) if any(metric.MFU in r.metrics for r in records) else None  # `device` is the device's name
    device_type = "cuda" if any(str(r.machine.get("device", "")).startswith("cuda") for r in records) else "cpu"
    machines = {k: sorted({r.machine[k] for r in records}) for k in ("torch", "commit", "host")}
    method = [  # "How this was measured", the report's closing section: the answer comes first
        f"- Device: **{device}**; torch {', '.join(machines['torch'])}; commit {', '.join(machines['commit'])}; "
        f"host {', '.join(machines['host'])}",
        f"- Study file: `{study.path.name}` (hash {study.file_hash}); model `{study.model}`, "
        f"dataset `{study.dataset}`; "
        + ("budget: throughput only (budget.throughput_only), " if study.budget.throughput_only else
           f"budget {study.budget.train_samples:,} training {_samples(study)} for accuracy, ")
        + f"{study.budget.describe_windows(device_type)}; "
        f"throughput in {study.throughput_unit}/s",
        f"- Trials: {count(len(records), 'combination')}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        + f"; {count(sum(len([m for m in r.measurements if m.complete]) for r in records), 'throughput measurement')} "
        f"in {count(len({m.block for r in records for m in r.measurements}), 'block')}",
        f"- Protocol: {followed(study, stored).describe(fraction=_fraction(compared))}. "
        + (f"Race: {stored.race['why']}." if stored.race else ""),
        f"- Host noise: the baseline's throughput varied by {100 * cv:.1f}% (coefficient of variation) across "
        f"blocks" if cv is not None else "- Host noise: the baseline ran in one block only, so its variation across "
        "blocks is unknown",
        f"- Compile cache: {CACHES}",
        *_bitwise_lines(stored, device),
        f"- Baseline fp32 precision: strict IEEE for matmuls and convolutions (`{BASELINE_FP32}`; on CUDA, TF32 "
        "only where the TF32 strategy is on).",
        f"- Written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `ablate report` from the stored trials.",
        "",
    ]
    out = [
        f"# ablate report: {study.name} ({search}) on {device}",
        "",
        f"{study.model} on {study.dataset}, {device}, {count(len(records), 'combination')}; how this was "
        "measured closes the report ([How this was measured](#how-this-was-measured)).",
        "",
        *([f"**Accuracy was not measured**: {notes[0]}. Speed-ups stand; test accuracy, parity and the effects on "
           "accuracy do not apply.", ""] if (notes := sorted({r.accuracy_note for r in records if r.accuracy_note}))
          else []),
        "## Recommendation",
        "",
    ]
    tol = study.accuracy_tolerance
    speedup_of = compared.speedup_of
    if rec and compose:
        pick = rec.pick
        s = speedup_of.get(pick.combination)
        out += [f"Recommended{' (the race leader)' if pick is rec.leader and len(rec.members) > 1 else ''}"
                f": **{pick.combination}**, {_factor(s.factor, s) if s else 'n/a'} the baseline's throughput "
                f"({_estimated_from(s) if s else ''}), "
                + (f"test accuracy {pick.accuracy:.2f}% "
                   f"({points(pick.accuracy - base.accuracy) if base and base.accuracy is not None else ''})."
                   if pick.accuracy is not None else "accuracy not measured."),
                "", "```python", *compose, "```", ""]
        out += answer.recommendation_lines(rec, speedup_of, tol,
                                          {c.combination: c.parity for c in compared.rows if c.parity})
    else:
        out += [f"None: {_why_none(records)}.", ""]
    if stored.seeds:
        method += [f"Seeds of this run: {seeds.describe(stored.seeds)} (parity's extra seeds: the "
                   "training seed plus 1, 2...).", ""]

    out += answer.load_lines(compared.load)
    if cv is not None and cv > NOISY_CV:
        out += [f"**A noisy host.** The baseline's throughput moved by {100 * cv:.0f}% between blocks (coefficient "
                "of variation): a single measurement cannot resolve effects of that size, and the speed-ups rest "
                "on pairing within blocks. Trust the intervals, which come from repeated blocks; where a "
                "combination has none (\"baseline\" noise), measure again on a quieter machine.", ""]
    out += explained.section(diagnosed, rec.pick.combination if rec else None)

    method += [
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
        "its own alone where that is clearly wider (\"own\"). A row's throughput is the "
        "baseline's (the geometric mean of its measurements) times the row's speed-up, so the two columns agree.",
    ]
    energy = compared.energy_counted
    out += ["## Speed-up of every combination", "",
            "Each combination's throughput over the same block's baseline's, paired, with its 95% interval "
            "(how: [How this was measured](#how-this-was-measured)).", "",
            "![speed-up per combination](speedup.png)", "",
            f"| combination | {study.throughput_unit}/s | speed-up (95% CI) | blocks | noise | test acc % | "
            f"Δ acc (points) | acc from | parity | peak MB (vs baseline) |{' MFU |' if mfu else ''}"
            + (" energy/sample vs baseline (95% CI) |" if energy else ""),
            f"|---|---:|---|---:|---|---:|---:|---:|---|---:|{'---:|' if mfu else ''}{'---|' if energy else ''}"]
    for c in (c for c in compared.rows if c.speedup):
        r, s = c.record, c.speedup
        assert s is not None  # the rows with a speed-up only
        out.append(f"| {r.combination} | {c.throughput:.0f} | {_factor(s.factor, s)} | {c.blocks or ''} | "
                   f"{'' if c.is_baseline else c.noise} | {'' if r.accuracy is None else f'{r.accuracy:.2f}'} | "
                   f"{'' if c.accuracy_change is None else points(c.accuracy_change)} | "
                   f"{'' if r.accuracy_from is None else f'#{r.accuracy_from}'} | "
                   f"{_parity_cell(c.parity)} | {_memory(c, compared.baseline)} |"
                   + (f" {100 * r.metrics[metric.MFU]:.1f}% |" if mfu and metric.MFU in r.metrics
                      else " |" if mfu else "") + (f" {_energy(c)} |" if energy else ""))
    out += ["", MEMORY[device_type], "", f"Energy per sample: {ENERGY_NOTE if energy else NOT_COUNTED + NO_COUNTER}."]
    if mfu:
        out += ["", f"MFU: {study.throughput_unit}/s x the model's training FLOPs per token / the device's dense "
                f"BF16 peak ({mfu.tflops:g} TFLOPS: {mfu.source}), whatever precision the combination ran in."]
    out += [""]
    method += ["", "Accuracy was trained once per seed per group of combinations that differ only in techniques that "
               "leave the numbers unchanged (\"acc from\" names the trial of the run's own seed); Δ acc is the mean "
               "paired change over the group's seeds (see Accuracy parity).", ""]

    out += ["## What each technique is worth", ""]
    if any(isinstance(f, EffectFit) for f in (throughput, accuracy)):  # else the figure would be text only
        pairs = any(f.pairs() for f in (throughput, accuracy) if isinstance(f, EffectFit))
        out += [f"![{'main effects and interactions' if pairs else 'main effects'}](effects.png)", ""]
    out += effects.section(throughput, accuracy, numeric_dims)

    out += ["## One-off costs: compilation and its break-even", ""]
    if breaks:
        out += ["One-off cost = model preparation plus first step, minus the same for the combination without the "
                "technique. Break-even = one-off cost / time saved per step. Budget time = training the study's "
                f"{study.budget.train_samples:,} samples end to end, one-off cost included (measured where both "
                "trials trained the full budget, else estimated from the first step and the steady throughput).",
                ""]
        for technique in sorted({b.technique for b in breaks}):
            mine = [b for b in breaks if b.technique == technique]
            pays = sorted(b.steps for b in mine if b.steps is not None)
            cost = sorted(b.extra_s for b in mine)[len(mine) // 2]
            out.append(f"- **{technique}**: median one-off cost {cost:.2f} s; faster per step in {len(pays)} of "
                       f"{count(len(mine), 'combination')}"
                       + (f", paying for itself after {count(round(pays[len(pays) // 2]), 'step')} "
                          "(median of those)" if pays else "") + ".")
        out += answer.break_even_rows(breaks)
        out.append("")
    else:
        out += ["No technique with a one-off cost (compilation) was measured against its eager counterpart.", ""]

    out += ["## Accuracy parity", ""]
    if base is None or base.accuracy is None:
        out += ["The baseline has no measured accuracy, so parity could not be checked.", ""]
    else:
        out += answer.parity_lines(compared.groups, records, tol)

    if front := compared.front:  # accuracy was measured
        out += ["## Pareto front: throughput against accuracy", "", "![throughput against accuracy](pareto.png)", ""]
        out += answer.pareto_lines(front, study.throughput_unit)
    if study.budget.target_accuracy is not None or study.budget.target_loss is not None:
        out += answer.time_to_target_lines(analysis.time_to_target(records), study)

    others = [r for r in records if not r.complete]
    if others:
        out += ["## Skipped and failed", ""]
        reasons = Counter((r.state, r.reason) for r in others)
        out += [f"- {n} {state}: {reason}" for (state, reason), n in reasons.most_common()] + [""]
    return "\n".join(out + ["## How this was measured", "", *method])


def _metrics(compared: DeviceComparisons, throughput: EffectFit | str, accuracy: EffectFit | str,
             cv: float | None) -> dict[str, float]:
    m: dict[str, float] = {"parity_failures": float(len(compared.flagged))}
    if cv is not None:
        m["baseline_cv_across_blocks"] = cv
    m.update(effects.metrics(throughput, accuracy))
    m.update({f"load.{k}": v for k, v in compared.load.figures.items()})
    rec = compared.recommendation
    c = compared.get(rec.pick.combination) if rec else None
    if c and c.factor is not None and not c.interval:
        m["recommended.speedup"] = c.factor
    elif c and c.interval and c.speedup:  # an interval is its speed-up's
        m.update({"recommended.speedup": c.interval.estimate, "recommended.speedup.low": c.interval.low,
                  "recommended.speedup.high": c.interval.high, "recommended.blocks": float(c.speedup.estimate.blocks),
                  "recommended.trial": float(c.record.number)})
    if c and (e := c.energy_interval):  # MLflow's metrics are numbers: "not counted here" is summary.json's
        m.update({"recommended.energy_ratio": e.estimate, "recommended.energy_ratio.low": e.low,
                  "recommended.energy_ratio.high": e.high})
    return m


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "-", text).strip("-").lower()


def _factor(i: Interval | None, s: Speedup | None = None) -> str:
    if i is None:
        return "n/a" if s is None else factor(s.point, no_interval=" (no interval: one block, no repeats)")
    return factor(i.estimate, i.low, i.high)


def _energy(c: Comparison) -> str:
    i = c.energy_interval
    return factor(i.estimate, i.low, i.high) if i else "" if c.energy_ratio is None else factor(c.energy_ratio)


def _parity_cell(p: parity.Parity | None) -> str:
    return "" if p is None else f"{p.label} {interval(p.low, p.high, signed=True)}"


def _estimated_from(s: Speedup) -> str:
    e = s.estimate
    if s.record.combination == BASELINE:
        return "the baseline itself"
    return f"{e.blocks} {e.phase} block{'s' if e.blocks != 1 else ''}, noise from {e.noise}, {e.df} degrees of freedom"


def _html(text: str, figures: list[Path], title: str) -> str:
    body = markdown.markdown(text, extensions=["tables", "fenced_code", "toc"])
    for path in figures:  # embed the plots so the page stands alone
        data = base64.b64encode(path.read_bytes()).decode()
        body = body.replace(f'src="{path.name}"', f'src="data:image/png;base64,{data}"')
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>"
            "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.4}"
            "table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 6px}"
            "img{max-width:100%}pre{background:#f4f4f4;padding:0.6em}</style></head>"
            f"<body>{body}</body></html>")

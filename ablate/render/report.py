"""The study report: Markdown plus a self-contained HTML page with the plots embedded, summary.json beside them, and
the terminal's answer and the MLflow parent run's metrics (`Report`).

Built from stored trials only (`ablate report` runs nothing). Trials from different devices are never mixed: each
device gets its own report. It renders one device's findings (`ablate.stats.answer.findings`), computed once for every
surface; it computes none: the answer comes first, its method closes it (`ablate.render.method`).
"""
from __future__ import annotations

import base64
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import markdown

from ablate.config.choices import BASELINE
from ablate.config.study import Study
from ablate.render import answer, effects, explained, glossary, method, plots, race, summaries, terminal, top
from ablate.render.results import NOT_COUNTED, same_training
from ablate.stats.answer.comparison import Comparison
from ablate.stats.answer.findings import Findings
from ablate.stats.parity import Parity
from ablate.stats.screening.effects import EffectFit
from ablate.stats.speedups import Interval, Speedup
from ablate.store import seeds
from ablate.store.files import replaced
from ablate.store.records import Record, State, baseline
from ablate.trial import metrics as metric
from ablate.words import count, factor, interval, points

NO_BASELINE = "the baseline did not complete, and every speed-up is a ratio to it"
ALL_BELOW = "no combination the race could judge"
RACE_TITLE = "How the race chose it"

@dataclass(kw_only=True)
class Report:
    """One device's report: where its files are, and what the run's last lines say (`summary`)."""

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
    accuracy: str | None = None  # the recommendation's accuracy verdict in words (`answer.accuracy_words`)

    def summary(self) -> str:
        """The run's last lines: the answer in one sentence (the stack, how much faster with its range, whether
        accuracy is safe), the compose line, the alternatives, then where the report is."""
        lines = []
        if self.recommended:
            m = self.metrics
            shown = "recommended.speedup.low" in m and self.recommended.combination != BASELINE
            speedup = factor(m.get("recommended.speedup", float("nan")))
            if shown:
                speedup += (f" the baseline's throughput (95% range {m['recommended.speedup.low']:.2f} to "
                            f"{m['recommended.speedup.high']:.2f}, {count(m['recommended.blocks'], 'block')})")
            elif self.recommended.combination != BASELINE:
                speedup += " the baseline's throughput"
            else:
                speedup = "your loop as it is; no stack was shown faster"
            said = f"recommended: {self.recommended.combination}: {speedup}"
            lines.append(terminal.message(said + (f"; {self.accuracy}" if self.accuracy else ""), indent="    "))
            lines += [f"  {line}" for line in (*(self.compose or ()), *self.lines, *filter(None, [self.moved]))]
        else:
            lines.append(terminal.message(f"recommended: none ({self.why_none})"))
        lines += [terminal.addressed(f"report ({self.device})", self.html),
                  terminal.addressed("summary for scripts", self.summary_json)]
        if self.seeds:
            lines.append(f"seeds: {seeds.describe(self.seeds)}")
        return "\n".join(lines)


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


def build(study: Study, found: list[Findings], search: str, folder: Path) -> list[Report]:
    """One report per device the study's trials ran on, written under `folder`, each rendering that device's
    findings (`ablate.stats.answer.findings.analyse_all`)."""
    return [_build_one(study, f, search, folder / (f"{search}-{_slug(f.device)}" if len(found) > 1 else search))
            for f in found]


def _build_one(study: Study, found: Findings, search: str, folder: Path) -> Report:
    folder.mkdir(parents=True, exist_ok=True)
    compared, device, rec = found.compared, found.device, found.recommendation
    picked = rec.pick.number if rec else None
    title = f"{study.name} ({search}) on {device}"
    pick = rec.pick.combination if rec else None

    figures = [
        plots.speedup_chart(folder / "speedup.png", compared, picked, title),
        plots.effects_chart(folder / "effects.png", found.throughput, found.accuracy, title),
        plots.pareto_chart(folder / "pareto.png", compared, picked, title, study.throughput_unit),
    ]
    (folder / explained.FIGURE).unlink(missing_ok=True)  # an earlier report's picture must not outlive its data
    if found.explanation.profiled:
        figures.append(plots.phases_chart(folder / explained.FIGURE, found.explanation, pick, title))
    said = _answer(study, found, search)
    text = "\n".join(said + glossary.section("\n".join(said)) + method.section(study, found))
    md, html, summary = folder / "report.md", folder / "report.html", folder / "summary.json"
    for path, content in ((md, text), (html, html_page(text, figures, title)),
                          (summary, json.dumps(summaries.summary(study, found, search), indent=2) + "\n")):
        with replaced(path) as file:
            file.write(content)
    return Report(device=device, folder=folder, markdown=md, html=html, summary_json=summary, plots=figures,
                  recommended=rec.pick if rec else None,
                  compose=found.compose.get(rec.pick.combination) if rec else None,
                  metrics={**_metrics(found), **explained.metrics(found.explanation)},
                  seeds=found.study_record.seeds, leader=rec.leader.combination if rec else None,
                  members=tuple(m.combination for m in rec.members) if rec else (),
                  lines=tuple(answer.terminal_lines(rec, compared.speedup_of)) if rec else (),
                  why_none=_why_none(found.records), moved=explained.terminal_line(found.explanation, pick),
                  accuracy=answer.accuracy_words(rec) if rec else None)


def _counted(records: list[Record]) -> str:
    """How many combinations were measured, and how many could not run here or failed."""
    states = Counter(r.state for r in records)
    left = [f"{n} {state.value}" for state in (State.SKIPPED, State.FAILED) if (n := states[state.value])]
    return f"{count(states[State.COMPLETE.value], 'combination')} measured" + "".join(f", {s}" for s in left)


def _why_none(records: list[Record]) -> str:
    """Why there is no recommendation: no complete baseline (it is always a candidate otherwise)."""
    return NO_BASELINE if baseline(records) is None else ALL_BELOW


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


def _answer(study: Study, found: Findings, search: str) -> list[str]:
    """The report up to its method: the recommendation, where the time goes, every combination's speed-up, what each
    technique is worth, one-off costs, accuracy parity, the Pareto front, the time to the target, what failed."""
    compared, records, device, rec = found.compared, found.records, found.device, found.recommendation
    base = baseline(records)
    compose = found.compose.get(rec.pick.combination) if rec else None
    notes = sorted({r.accuracy_note for r in records if r.accuracy_note})
    out = [
        f"# ablate report: {study.name} ({search}) on {device}",
        "",
        *top.section(rec, compared.speedup_of, compose, found.study_record.cost_summary, _why_none(records),
                     unmeasured=notes[0] if notes else None),
        f"{study.model} on {study.dataset}, {device}: {_counted(records)}; how this was measured closes the "
        f"report ([{method.TITLE}](#how-this-was-measured)).",
        "",
        *([f"**Accuracy was not measured**: {notes[0]}. Speed-ups stand; test accuracy, parity and the effects on "
           "accuracy do not apply.", ""] if notes else []),
    ]
    if rec and compose:
        out += [f"## {RACE_TITLE}", ""]
        out += race.recommendation_lines(rec, compared.speedup_of, study.accuracy_tolerance,
                                          {c.combination: c.parity for c in compared.rows if c.parity})

    out += answer.load_lines(compared.load)
    if (cv := found.baseline_cv) is not None and cv > NOISY_CV:
        out += [f"**A noisy host.** The baseline's throughput moved by {100 * cv:.0f}% between blocks (coefficient "
                "of variation): a single measurement cannot resolve effects of that size, and the speed-ups rest "
                "on pairing within blocks. Trust the intervals, which come from repeated blocks; where a "
                "combination has none (\"baseline\" noise), measure again on a quieter machine.", ""]
    out += explained.section(found.explanation, rec.pick.combination if rec else None)
    out += _speedups(study, found)

    out += ["## What each technique is worth", ""]
    throughput, accuracy = found.throughput, found.accuracy
    if any(isinstance(f, EffectFit) for f in (throughput, accuracy)):  # else the figure would be text only
        pairs = any(f.pairs() for f in (throughput, accuracy) if isinstance(f, EffectFit))
        out += [f"![{'main effects and interactions' if pairs else 'main effects'}](effects.png)", ""]
    out += effects.section(throughput, accuracy, list(found.accuracy_dims))
    out += _one_off_costs(study, found)

    out += ["## Accuracy parity", ""]
    if base is None or base.accuracy is None:
        out += ["The baseline has no measured accuracy, so parity could not be checked.", ""]
    else:
        out += answer.parity_lines(compared.groups, records, study.accuracy_tolerance, compared.untrained,
                                   compared.quick)

    if front := compared.front:  # accuracy was measured
        out += ["## Pareto front: throughput against accuracy", "", "![throughput against accuracy](pareto.png)", ""]
        out += answer.pareto_lines(front, study.throughput_unit)
    if found.time_to_target is not None:
        out += answer.time_to_target_lines(found.time_to_target, study)

    others = [r for r in records if not r.complete]
    if others:
        out += ["## Skipped and failed", ""]
        reasons = Counter((r.state, r.reason) for r in others)
        out += [f"- {n} {state}: {reason}" for (state, reason), n in reasons.most_common()] + [""]
    return out


def _speedups(study: Study, found: Findings) -> list[str]:
    """The table of every combination's speed-up, with what its memory, energy and MFU columns mean."""
    compared, mfu, energy = found.compared, found.peak, found.compared.energy_counted
    out = ["## Speed-up of every combination", "",
           "Each combination's throughput over the same block's baseline's, paired, with its 95% interval "
           f"(how: [{method.TITLE}](#how-this-was-measured)).", "",
           "![speed-up per combination](speedup.png)", "",
           f"| combination | {study.throughput_unit}/s | speed-up (95% CI) | blocks | noise | test acc % | "
           f"Δ acc (points) | acc from | parity | peak MB (vs baseline) |{' MFU |' if mfu else ''}"
           + (" energy/sample vs baseline (95% CI) |" if energy else ""),
           f"|---|---:|---|---:|---|---:|---:|---:|---|---:|{'---:|' if mfu else ''}{'---|' if energy else ''}"]
    for c in (c for c in compared.rows if c.speedup):
        r, s = c.record, c.speedup
        assert s is not None  # the rows with a speed-up only
        out.append(f"| {r.combination} | {c.throughput:.0f} | {_factor(s.interval, s)} | {c.blocks or ''} | "
                   f"{'' if c.is_baseline else c.noise} | {'' if r.accuracy is None else f'{r.accuracy:.2f}'} | "
                   f"{'' if c.accuracy_change is None else points(c.accuracy_change)} | "
                   f"{'' if r.accuracy_from is None else f'#{r.accuracy_from}'} | "
                   f"{same_training(c) or _parity_cell(c.parity)} | {_memory(c, compared.baseline)} |"
                   + (f" {100 * r.metrics[metric.MFU]:.1f}% |" if mfu and metric.MFU in r.metrics
                      else " |" if mfu else "") + (f" {_energy(c)} |" if energy else ""))
    out += ["", MEMORY[found.device_type], "",
            f"Energy per sample: {ENERGY_NOTE if energy else NOT_COUNTED + NO_COUNTER}."]
    if mfu:
        out += ["", f"MFU: {study.throughput_unit}/s x the model's training FLOPs per token / the device's dense "
                f"BF16 peak ({mfu.tflops:g} TFLOPS: {mfu.source}), whatever precision the combination ran in."]
    return out + [""]


def _one_off_costs(study: Study, found: Findings) -> list[str]:
    """One-off costs (compilation) and when they pay for themselves: per technique, then per combination."""
    out = ["## One-off costs: compilation and its break-even", ""]
    if not found.break_even:
        return out + ["No technique with a one-off cost (compilation) was measured against its eager counterpart.", ""]
    out += ["One-off cost = model preparation plus first step, minus the same for the combination without the "
            "technique. Break-even = one-off cost / time saved per step. Budget time = training the study's "
            f"{study.budget.train_samples:,} samples end to end, one-off cost included (measured where both "
            "trials trained the full budget, else estimated from the first step and the steady throughput).", ""]
    for t in found.one_off:
        out.append(f"- **{t.technique}**: median one-off cost {t.median_s:.2f} s; faster per step in {t.faster} of "
                   f"{count(t.combinations, 'combination')}"
                   + (f", paying for itself after {count(round(t.median_steps), 'step')} "
                      "(median of those)" if t.median_steps is not None else "") + ".")
    return out + answer.break_even_rows(found.break_even) + [""]


def _metrics(found: Findings) -> dict[str, float]:
    """The MLflow parent run's figures (its diagnosis's apart: `explained.metrics`)."""
    compared, cv = found.compared, found.baseline_cv
    m: dict[str, float] = {"parity_failures": float(len(compared.flagged))}
    if cv is not None:
        m["baseline_cv_across_blocks"] = cv
    m.update(effects.metrics(found.throughput, found.accuracy))
    m.update({f"load.{k}": v for k, v in compared.load.figures.items()})
    rec = compared.recommendation
    c = compared.get(rec.pick.combination) if rec else None
    if c and c.point is not None and not c.interval:
        m["recommended.speedup"] = c.point
    elif c and c.interval and c.speedup:  # an interval is its speed-up's
        m.update({"recommended.speedup": c.interval.point, "recommended.speedup.low": c.interval.low,
                  "recommended.speedup.high": c.interval.high, "recommended.blocks": float(c.speedup.estimate.blocks),
                  "recommended.trial": float(c.record.number)})
    if c and (e := c.energy_interval):  # MLflow's metrics are numbers: "not counted here" is summary.json's
        m.update({"recommended.energy_ratio": e.point, "recommended.energy_ratio.low": e.low,
                  "recommended.energy_ratio.high": e.high})
    return m


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "-", text).strip("-").lower()


def _factor(i: Interval | None, s: Speedup | None = None) -> str:
    if i is None:
        return "n/a" if s is None else factor(s.point, no_interval=" (no interval: one block, no repeats)")
    return factor(i.point, i.low, i.high)


def _energy(c: Comparison) -> str:
    i = c.energy_interval
    return factor(i.point, i.low, i.high) if i else "" if c.energy_ratio is None else factor(c.energy_ratio)


def _parity_cell(p: Parity | None) -> str:
    return "" if p is None else f"{p.label} {interval(p.low, p.high, signed=True)}"


def html_page(text: str, figures: list[Path], title: str) -> str:
    """A self-contained page from Markdown, its figures embedded: the report's, and `ablate compare`'s."""
    body = markdown.markdown(text, extensions=["tables", "fenced_code", "toc"])
    for path in figures:  # embed the plots so the page stands alone
        data = base64.b64encode(path.read_bytes()).decode()
        body = body.replace(f'src="{path.name}"', f'src="data:image/png;base64,{data}"')
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>"
            "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.4}"
            "table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 6px}"
            "img{max-width:100%}pre{background:#f4f4f4;padding:0.6em}</style></head>"
            f"<body>{body}</body></html>")

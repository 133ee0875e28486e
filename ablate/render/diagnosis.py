"""A baseline's profile and the strategies' ceilings in text (`ablate.stats.diagnosis`'s figures; it computes none):
`ablate diagnose`'s output, and the lines a run prints once its baseline's first measurement is in.

Every line fits `terminal.LINE` columns whatever the terminal (the names of a long list wrap, indented), so the
output reads the same in a 100-column terminal, a pipe and a log.
"""
from __future__ import annotations

import textwrap
from typing import Iterable

from ablate.render.terminal import LINE, width
from ablate.stats.diagnosis import UNLIKELY_BELOW, WORDS, Prediction, Profile
from ablate.trial import metrics as metric

BAR = 30  # columns of the widest bar (a phase that took the whole step)
IDLE = "gpu idle"
BAR_OF_HELP = f"x{UNLIKELY_BELOW:.2f}"  # the ceiling under which a technique is unlikely to help


def fill(text: str) -> str:
    """`text` wrapped at words to `LINE` columns, or the terminal's where it is narrower; the lines after the first
    indented."""
    return textwrap.fill(text, width=max(min(LINE, width(LINE)), 40), subsequent_indent="    ",
                         break_long_words=False, break_on_hyphens=False)


def seconds(step_s: float) -> str:
    return f"{step_s * 1000:.3g} ms" if step_s < 1 else f"{step_s:.3g} s"


def bars(profile: Profile) -> list[str]:
    """Each phase of the step as a bar and its share, the GPU's idle share where it was measured."""
    rows = [(phase, profile.share(phase), WORDS[phase]) for phase in metric.STEP_PHASES]
    if profile.idle is not None:
        rows.append((IDLE, profile.idle, "the device ran nothing (launch overhead)"))
    return [f"  {name:<10}{'█' * round(share * BAR):<{BAR}} {share:>4.0%}  {words}" for name, share, words in rows]


def predictions(found: Iterable[Prediction]) -> list[str]:
    """Every technique's prediction, those that can help first (highest ceiling first), then those unlikely to,
    then those whose targets no phase measures, then those that cannot act on this model at all."""
    found = list(found)
    fits = [p for p in found if p.inapplicable is None]
    helps = sorted((p for p in fits if p.can_help), key=lambda p: -(p.ceiling or 0))
    unlikely = sorted((p for p in fits if p.unlikely), key=lambda p: -(p.ceiling or 0))
    unmeasured = [p for p in fits if p.ceiling is None]
    lines: list[str] = []
    for title, group in ((f"can help (a ceiling of {BAR_OF_HELP} or more):", helps),
                         (f"unlikely to help (a ceiling under {BAR_OF_HELP}: its phases cost little):", unlikely),
                         ("not predicted:", unmeasured),
                         ("does not apply to this model (it lacks the part the technique acts on):",
                          [p for p in found if p.inapplicable is not None])):
        if group:
            lines += [title, *(fill(f"  {p.describe()}") for p in group)]
    return lines


def run_start(profile: Profile, planned: Iterable[Prediction]) -> list[str]:
    """A few lines for a run's start: the baseline's shares, and which planned techniques are unlikely to help."""
    parts = [f"{phase} {profile.share(phase):.0%}" for phase in metric.STEP_PHASES]
    if profile.idle is not None:
        parts.append(f"{IDLE} {profile.idle:.0%}")
    lines = [fill(f"baseline's step ({seconds(profile.step_s)}): {', '.join(parts)}")]
    unlikely = [p for p in planned if p.unlikely]
    if unlikely:
        names = ", ".join(f"{p.name} ({' + '.join(p.targets)} {p.share:.0%})" for p in unlikely)
        lines.append(fill(f"before measuring, unlikely to help (a ceiling under {BAR_OF_HELP}): {names}"))
    return lines


def diagnose_output(title: str, profile: Profile, found: Iterable[Prediction], unavailable: Iterable[str],
                    device_type: str) -> list[str]:
    """`ablate diagnose`'s output: `title`, the shares, every available technique's prediction, those not available
    on `device_type`, and what a ceiling is."""
    lines = [fill(title), *bars(profile), "", *predictions(found)]
    if names := sorted(unavailable):
        lines.append(fill(f"not available on {device_type}: {', '.join(names)}"))
    return [*lines, "", fill("A ceiling is the step's speed-up were those phases free (Amdahl's law): a prediction "
                             "from this one profile, which a study's measurement confirms or refutes.")]

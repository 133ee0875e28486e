"""The report's race section: how the race chose its answer. The leader and its estimate, the simpler member
that stands in for it, every member the race could not tell apart with the interval its decision used, the
dropped and the unseated.

Every sentence states a test's outcome, with the interval that decided it: "could not be told apart" is a paired
contrast the studentized range did not reject, printed with its simultaneous interval at the look's alpha
(`ablate.stats.contrasts`); "shown within 2% of the leader" is the upper bound of two one-sided tests at an alpha
shared over the members tested (`ablate.stats.answer.verdicts`); a parity verdict is a non-inferiority test
(`ablate.stats.parity`).
"""
from __future__ import annotations

import math

from ablate.config.choices import BASELINE
from ablate.render.answer import LEVELS_NOTE, TWO_LEVELS, margin_warning, speedup_factor, unraced
from ablate.render.summaries import ratio
from ablate.stats import parity
from ablate.stats.answer.verdicts import Recommendation
from ablate.stats.contrasts import EQUIVALENCE_ALPHA, Contrast
from ablate.stats.protocol import CONFIRM
from ablate.stats.race.equivalence import CAP, Equivalence
from ablate.stats.speedups import Speedup
from ablate.words import confidence, count, factor, percent


def recommendation_lines(rec: Recommendation, speedup_of: dict[str, Speedup], tolerance: float,
                         verdicts: dict[str, parity.Parity] | None = None) -> list[str]:
    """The race's section of the report: the leader and the headline, every other member with what it costs
    against the leader and the interval its decision used, the dropped, the unseated. `verdicts`: each
    combination's parity verdict (the members' are named)."""
    out: list[str] = []
    if rec.accuracy_unmeasured:
        out += [f"**Accuracy could not be measured** ({rec.accuracy_unmeasured}), so parity was not judged: the "
                "answer is on speed alone, the baseline among the candidates.", ""]
    out += _leader_lines(rec, speedup_of.get(rec.leader.combination)) + _headline_lines(rec)
    out += _member_lines(rec, verdicts or {}) + _left_lines(rec, speedup_of)
    if rec.parity and rec.parity.verdict == parity.UNCERTAIN:
        out += ["", f"**Accuracy parity of {rec.pick.combination} is uncertain**: {rec.parity.describe(tolerance)}. "
                    "Its interval straddles the tolerance, its estimate within it (where the estimate is past it, "
                    "the group is probably below, and never recommended); more seeds would decide it."]
    return out + [""]


def _leader_lines(rec: Recommendation, s: Speedup | None) -> list[str]:
    """The race's leader, its speed-up and what that estimate rests on; how many rounds the race ran."""
    leader = rec.leader
    if leader.combination == BASELINE:
        # Every other estimate is a ratio to the baseline, so its x1.00 cannot read high and needs no confirmation.
        out = [f"The race's leader is **{BASELINE}**: no raced combination's estimate was above its throughput "
               f"(x1.00 by definition, so no confirmation blocks ran)."]
    else:
        basis = ("from its confirmation blocks, which its selection never saw" if rec.confirmed else
                 "from the blocks that selected it: no confirmation blocks ran, so it may read high")
        out = [f"The race's leader is **{leader.combination}**: {speedup_factor(s)} the baseline's throughput "
               f"({basis}" + (f", {count(s.estimate.blocks, 'block')}, noise from {s.estimate.noise}" if s else "")
               + ")." + (f" {TWO_LEVELS}" if leader.combination in rec.two_level else "")]
    if rec.rounds > 1:
        out += ["", f"The race ran {rec.rounds} times: every member of an earlier final set was out on accuracy "
                    f"(`below` or probably below), and it ran again without their groups."]
    return out


def _headline_lines(rec: Recommendation) -> list[str]:
    """Why the headline is the leader or a simpler member in its place, and the margin's note where it is low."""
    margin, design, pick = percent(rec.margin), rec.resolution, rec.pick
    whose = ("" if design is None else ": the study's" if design.study_set else
             f": the smallest its design can show, at most {100 * CAP:g}%")
    out: list[str] = []
    if rec.unconfirmed:
        e = rec.equivalence[pick.combination]
        out += ["", f"**Keep your loop** (the baseline) in its place: the leader read x{math.exp(e.contrast.diff):.2f}"
                    f" the baseline's throughput on {count(e.contrast.blocks, 'confirmation block')}, which its "
                    "selection never saw: no faster. The race picks the largest of several estimates, high by chance "
                    "in a near tie; a leader must read faster than the loop on blocks its choice never saw."]
    elif pick is not rec.leader:
        e = rec.equivalence[pick.combination]
        out += ["", f"**{pick.combination}** is recommended in its place: it has fewer techniques, and an equivalence "
                    f"test showed the leader at most x{e.bound:.3f} as fast as it, within the margin of "
                    f"{margin} (`protocol.equivalence_margin`{whose}). Left out of the leader's stack: "
                    f"{' and '.join(rec.left_out) or 'nothing'}, which may cost up to {percent(e.allowed)} (the "
                    f"equivalence bound)."]
    elif rec.equivalence:
        out += ["", f"It is recommended: no simpler member was shown within {margin} of it "
                    f"(`protocol.equivalence_margin`)."]
    if (warning := margin_warning(rec)) is not None:
        out += ["", f"Note: {warning}."]
    return out


def _member_lines(rec: Recommendation, verdicts: dict[str, parity.Parity]) -> list[str]:
    """The members the race could not tell apart from the leader, each with the interval its decision used."""
    others = [m for m in rec.members if m is not rec.leader]
    if not others:
        return []
    tested = len(rec.equivalence)
    out = ["", "The race could not tell these apart from the leader; each with its throughput over the "
               "leader's and the interval the race's decision used (simultaneous: the studentized range over the "
               "look's combinations at the look's alpha; told apart exactly when it excludes x1.00). Not told "
               "apart is not shown as fast (the race has little power by design), so a simpler one stands in "
               f"for the leader only where two one-sided tests show the leader at most {percent(rec.margin)} faster "
               f"(at {EQUIVALENCE_ALPHA:.0%}" + (f" shared over the {tested} simpler members tested, Bonferroni"
                                                  if tested > 1 else "") + "):", ""]
    for m in others:
        test = rec.equivalence.get(m.combination)
        out.append(f"- **{m.combination}**{' (recommended)' if m is rec.pick else ''}: "
                   f"{decided(rec.contrasts.get(m.combination))}"
                   + (f"; {_equivalence(test)}" if test else "") + _parity_word(verdicts.get(m.combination))
                   + (f"; {LEVELS_NOTE}" if m.combination in rec.two_level else "") + ".")
    return out


def _left_lines(rec: Recommendation, speedup_of: dict[str, Speedup]) -> list[str]:
    """The combinations told apart and dropped, and those that never got a race seat."""
    out: list[str] = []
    if rec.eliminated:
        out += ["", "Told apart from the leader by paired contrasts and dropped from the race:", ""]
        out += [f"- {c}: " + (decided(rec.dropped.get(c)) if c in rec.dropped else "dropped") + "."
                for c in rec.eliminated]
    if rec.not_raced:
        out += ["", "Never raced (no seat, or no block left), so not recommended: their estimates come from "
                    "screening alone.", ""]
        out += ["- " + c + ": " + unraced(c, rec, speedup_of, " the baseline's throughput") for c in rec.not_raced]
    return out


def _of_leader(c: Contrast[str], bounds: tuple[float, float]) -> str:
    """A member's throughput as a share of the leader's, with `bounds` (of leader / it, log): x0.96 [0.88, 1.05]."""
    return factor(math.exp(-c.diff), ratio(-bounds[1]), ratio(-bounds[0]))


def decided(c: Contrast[str] | None) -> str:
    """A race contrast in words, with the interval its decision used: the simultaneous one (the studentized range
    at the look's alpha over the look's k combinations, its confidence given); where no look judged it (fewer
    race blocks than a look needs), the pointwise 95% one, said so."""
    if c is None or c.se is None:
        return "too few shared race blocks to compare"
    blocks = count(c.blocks, "shared race block")
    if (bounds := c.simultaneous()) is not None:
        return (f"{_of_leader(c, bounds)} the leader's throughput (simultaneous {confidence(c.alpha)} over "
                f"{c.k} combinations, {blocks}" + (", guarded against two-level processes" if c.guarded else "")
                + ")")
    pointwise = c.interval()
    assert pointwise is not None  # it has a standard error
    return f"{_of_leader(c, pointwise)} the leader's throughput (pointwise 95%, {blocks}: too few for a look)"


def _equivalence(e: Equivalence) -> str:
    """A simpler member's equivalence test: shown within the margin, or not shown, with what the data allow (never
    "as fast" for a member the test could not show within it)."""
    data = "its confirmation blocks" if e.data == CONFIRM else "the race's blocks"
    allowed = percent(e.allowed, signed=True)
    said = (f"shown within {percent(e.margin)} (the leader at most {allowed} faster)" if e.shown else
            f"not shown equivalent (the data allow up to {allowed})")
    return f"on {data}, one-sided {confidence(e.alpha)}: {said}"


def _parity_word(p: parity.Parity | None) -> str:
    return f"; parity {p.label}" if p else ""

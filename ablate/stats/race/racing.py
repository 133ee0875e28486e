"""The race after screening, its confirmation blocks, and the recommendation that comes out of them.

- **The field**: the screening leader among the eligible combinations (every
  runnable one: accuracy comes after the race, and a new round leaves out the
  groups it put out, `ablate.stats.race.finalists`) and those
  screening cannot tell apart from it (the race's first look, at
  `SCREEN_ALPHA` of the family's alpha), the best `contenders` of them raced
  first. The baseline is in every race block
  anyway, so it is in the field too: "no technique" may be the answer.
  Screened on a fraction (`ablate.stats.screening.fraction`): the screening model's
  field (`factorial.race_field`), cells never measured among them.
- **Elimination**: after each race block from `MIN_RACE_BLOCKS` on, the leader
  (the highest race-only estimate) is compared with every other field member
  by paired contrasts over their shared race blocks; those the studentized
  range tells apart at the look's share of the race's alpha
  (`ablate.stats.contrasts`) drop out; on five shared race blocks or
  fewer only where the lead is beyond what a run of processes at one level
  of a two-level (bimodal) process could give, or an exact sign-flip test
  agrees, and a pair's spread counts the screening block it shared. Each
  look is replayed from the stored measurements, so the race is a pure
  function of them.
- **Challengers**: an eligible combination never raced whose screening
  word beats the leader's race estimate takes a free seat in the next race
  block: it is raced, never recommended on its screening alone. That word is
  the screening model's prediction wherever one was fitted (it pools every
  screening process; the luckiest of 48 single ones reads far above its
  truth), else the combination's own screening estimate.
- **Past the planned blocks**: where `race_blocks` leave members not told
  apart, up to `extra_race_blocks` more blocks of the leader and its closest
  contender only (re-ranked after each; the rest wait, still in the field), so
  that a near tie at the top is settled by more measurements rather than named
  by whichever process was luckier, and a second run names the same stack
  (docs/measuring.md, "Past the planned blocks"). Their looks spend `EXTRA_SHARE` of the race's
  alpha and are guarded as the first five blocks are (a two-level process's
  runs at one level come with more looks too). Only while the blocks left
  could settle the tie (`ablate.stats.race.equivalence.settles`: tell the pair
  apart, or show them within the margin, the gap as observed): a true tie at
  8% noise never could, and its extra blocks would be spent for nothing.
- **Stop**: when no contender is left after `MIN_RACE_BLOCKS`, or after
  `race_blocks` and the extra blocks. Then `confirm_blocks` blocks of the leader, the simplest
  member of the final set and the baseline, which no selection saw: the
  leader's reported speed-up and interval come from them only, so choosing
  it does not inflate them (the race leader is the max of several estimates,
  biased up by about one standard error in a four-way tie). Where the
  baseline is in the leader's set and those blocks read the leader no faster
  than it, as many more (`_unconfirmed`): on all of them the answer is the
  baseline if the leader still reads no faster (`ablate.stats.answer.verdicts`).
- **The answer** is the leader, with the set the race could not tell apart from
  it: not told apart is not shown as fast (the race has little power by
  design), so a simpler member replaces the leader only where an equivalence
  test shows it within the study's margin (`ablate.stats.answer.verdicts`, on the
  contrasts `confirmed` gives). Each eliminated combination keeps the contrast
  that dropped it (`dropped_by`: its interval is the one that decided), and
  field members that never got a seat are named (`not_raced`), with their
  screening estimates. Raced combinations whose per-block differences from
  the baseline fall in two levels are named (`two_level`: a flag for the
  report, `ablate.stats.race.levels`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import AbstractSet, Callable, Container, Generic, Mapping, Sequence, TypedDict

from ablate.stats import variance
from ablate.stats.contrasts import (
    ALPHA,
    EQUIVALENCE_ALPHA,
    Contrast,
    judged,
    look_alpha,
    paired,
)
from ablate.stats.protocol import (
    CONFIRM,
    FULL,
    MIN_RACE_BLOCKS,
    MODELLED,
    RACE,
    SCREEN,
    Estimate,
    Key,
    Measurement,
    ProtocolSettings,
    default_techniques,
    estimates,
    noise_sources,
)
from ablate.stats.race import confirmation, equivalence, opening
from ablate.stats.race.blocks import by_block, differences, from_baseline, relative
from ablate.stats.race.levels import two_levels
from ablate.stats.screening import factorial
from ablate.words import count, percent


@dataclass(frozen=True)
class Race(Generic[Key]):
    """Where the race stands after the blocks measured so far."""

    leader: Key | None
    contenders: tuple[Key, ...]  # not told apart from the leader (yet), best first
    race_blocks: int  # race blocks measured
    next_block: tuple[Key, ...] | None  # the combinations of the next block (baseline added), None: stop
    why: str
    phase: str = RACE  # the next block's phase: RACE or CONFIRM
    contrasts: tuple[Contrast[Key], ...] = ()  # the leader against every other field member, at the last look
    eliminated: tuple[Key, ...] = ()  # told apart from the leader, in the order they dropped out
    pending: tuple[Key, ...] = ()  # challengers never raced whose screening word beats the leader's (`race`)
    confirm_blocks: int = 0
    dropped_by: tuple[Contrast[Key], ...] = ()  # per eliminated combination, the contrast of the look that dropped it
    not_raced: tuple[Key, ...] = ()  # eligible, not screened apart from the leader (or pending), never raced
    two_level: tuple[Key, ...] = ()  # raced combinations whose processes ran at two levels (`levels.two_levels`)
    # Eligible combinations never measured (a fraction was screened): the screening model's prediction of each.
    predicted: Mapping[Key, Estimate] = dataclasses.field(default_factory=dict, compare=False)
    by_model: bool = False  # no race: the leader is the screening model's best, not the largest reading (`_unraced`)


class _Standing(TypedDict, Generic[Key]):
    """The race's standing after its last look: the fields of `Race` that its next block and confirmation share."""

    leader: Key
    contenders: tuple[Key, ...]
    race_blocks: int
    contrasts: tuple[Contrast[Key], ...]
    eliminated: tuple[Key, ...]
    dropped_by: tuple[Contrast[Key], ...]
    predicted: Mapping[Key, Estimate]


def _look(values: dict[Key, dict[int, float]], baseline: Key, field: list[Key], blocks: Sequence[int], alpha: float,
          model: Callable[[Key], tuple[float, int]] | None = None,
          screened: dict[Key, dict[int, float]] | None = None,
          guarded: bool = False) -> tuple[Key, list[Contrast[Key]], set[Key]]:
    """The leader among `field` on `blocks`, its contrasts with the others (judged: each with the alpha and the
    field size its decision used), and those told apart from it.
    `model`: a combination's process variance from the variance model, with its degrees of freedom."""
    shown = {c: values.get(c, {}) for c in field}
    shown = {c: {b: v for b, v in by.items() if b in blocks} for c, by in shown.items()}
    rel = {c: relative(values, c, baseline, blocks) for c in field}
    ranked = {c: -math.inf if r is None else r for c, r in rel.items()}
    leader = max(sorted(field, key=str), key=lambda c: ranked[c])
    found = judged([paired(shown[leader], shown[c], c,
                           variance.of_difference(model(leader), model(c)) if model else None,
                           differences(screened or {}, leader, c), guarded)
                    for c in sorted(field, key=str) if c != leader], alpha, len(field))
    return leader, found, {c.other for c in found if c.apart}


def race(measurements: Sequence[Measurement[Key]], baseline: Key, eligible: AbstractSet[Key],
         protocol: ProtocolSettings, techniques: Callable[[Key], frozenset] | None = None,
         screen: factorial.Fit[Key] | None = None) -> Race[Key]:
    """The next block, from every measurement so far and the eligible combinations (`ablate.stats.race.finalists.final`:
    every runnable one, less the accuracy groups an earlier round's parity put out).

    `screen`: where a screening model was fitted (`ablate.stats.screening.factorial`: a fraction, or the whole grid):
    the race opens with its field, and eligible combinations challenge on its predictions, measured or not.

    Call it once every planned measurement has a result; it is deterministic, so workers that call it on the
    same measurements plan the same block.
    """
    techniques = techniques or default_techniques(baseline)
    est = {c: e for c, e in estimates(measurements, baseline, techniques).items() if c in eligible}
    fitted = variance.fit(noise_sources(measurements, baseline, techniques))
    model = (lambda c: (fitted.variance(techniques(c)), fitted.df_for(techniques(c)))) if fitted else None
    values, screened = by_block(measurements, RACE), by_block(measurements, SCREEN)
    n_race = len(blocks := sorted({b for by in values.values() for b in by}))
    if not est:
        return Race(None, (), n_race, None, "no combination within the accuracy tolerance was measured")
    if not protocol.racing:
        return _unraced(measurements, baseline, est, protocol, screen)
    measured = {m.combination for m in measurements}
    predicted = {c: Estimate(p.log, p.se, p.df, 0, SCREEN, MODELLED)  # no block of its own; the model's noise
                 for c, p in (screen.predictions.items() if screen else ())
                 if c in eligible and c != baseline and c not in measured}
    # Screening's word on each (module docstring, "Challengers"): the model's prediction, else its own estimate.
    screen_log = {**{c: e.log for c, e in est.items()}, **_modelled(screen, eligible)}
    screen_rank = sorted(screen_log, key=lambda c: (-screen_log[c], str(c)))
    if not n_race:
        opened = opening.field(est, eligible, baseline, protocol.contenders, screen)
        members = [c for c in opened if c != baseline][: max(1, protocol.contenders)]
        if not members:
            return Race(baseline, (), 0, None, "no combination could still beat the baseline", predicted=predicted)
        return Race(opened[0], tuple(opened[1:]), 0, tuple(members), "racing", predicted=predicted)
    leader, contrasts, out, field, last = _replay(values, blocks, baseline, eligible, est, protocol, model, screened)
    rel = {c: relative(values, c, baseline, blocks) for c in field}
    ranked = {c: r if r is not None else -math.inf for c, r in rel.items()}
    survivors = sorted((c for c in field if c != leader and c not in out), key=lambda c: (-ranked[c], str(c)))
    leader_rel = rel[leader]
    beat = leader_rel if leader_rel is not None else 0.0
    challengers = [c for c in screen_rank if c not in values and c != baseline and screen_log[c] > beat]
    standing = _Standing(leader=leader, contenders=tuple(survivors), race_blocks=n_race, contrasts=tuple(contrasts),
                         eliminated=tuple(out), dropped_by=tuple(last[c] for c in out if c in last),
                         predicted=predicted)
    return _decide(measurements, standing, challengers, len(field), set(values), baseline, eligible, protocol,
                   techniques, screen)


def _looks(protocol: ProtocolSettings) -> int:
    """The race's planned looks, one after each race block from `MIN_RACE_BLOCKS` on: its alpha is spent over them."""
    return max(1, protocol.race_blocks - MIN_RACE_BLOCKS + 1)


def _replay(values: dict[Key, dict[int, float]], blocks: Sequence[int], baseline: Key, eligible: AbstractSet[Key],
            est: Mapping[Key, Estimate], protocol: ProtocolSettings, model: Callable[[Key], tuple[float, int]] | None,
            screened: dict[Key, dict[int, float]],
            ) -> tuple[Key, list[Contrast[Key]], list[Key], list[Key], dict[Key, Contrast[Key]]]:
    """The race's looks replayed from its measurements, one after each race block (`blocks`): the field of block n
    is who ran in it, less the eliminated. The leader, its contrasts and the field at the last look, the eliminated
    in the order they dropped out, and each combination's contrast at the latest look it was in."""
    looks = _looks(protocol)
    out: list[Key] = []
    contrasts: list[Contrast[Key]] = []
    last: dict[Key, Contrast[Key]] = {}
    field: list[Key] = []
    for n in range(1, len(blocks) + 1):
        past = n > protocol.race_blocks
        if past:  # past the planned blocks only the top two run: the rest wait, still in
            field = [c for c in field if c not in out]
        else:
            # One that ran in an earlier race block but not in this one was dropped when this block was planned.
            # The replayed look may judge it otherwise (the variance model has learnt from later blocks since), but
            # what was measured is the record: a dropped combination stays dropped (its contrast: that look's).
            out += sorted((c for c in values if c not in out and blocks[n - 1] not in values[c]
                           and any(b in values[c] for b in blocks[:n - 1])), key=str)
            field = [c for c in values if blocks[n - 1] in values[c] and c not in out]
            if baseline in eligible and baseline not in field and baseline not in out:
                field.append(baseline)
            field = [c for c in field if c in est]
        alpha = look_alpha(n - MIN_RACE_BLOCKS + 1, looks, extra=protocol.extra_blocks) if n >= MIN_RACE_BLOCKS else 0.0
        leader, contrasts, dropped = _look(values, baseline, field, blocks[:n], alpha, model, screened, guarded=past)
        last.update({c.other: c for c in contrasts})
        out += sorted(dropped, key=str)
    return leader, contrasts, out, field, last


def _decide(measurements: Sequence[Measurement[Key]], standing: _Standing[Key], challengers: list[Key], k: int,
            raced: set[Key], baseline: Key, eligible: AbstractSet[Key], protocol: ProtocolSettings,
            techniques: Callable[[Key], frozenset], screen: factorial.Fit[Key] | None) -> Race[Key]:
    """The stop decision after the replayed looks (`k`: the last look's field): another race block (with the
    challengers that take a free seat), one more past the planned blocks, or the stop with why, then confirmation."""
    leader, survivors, n_race = standing["leader"], standing["contenders"], standing["race_blocks"]
    seats = max(0, max(1, protocol.contenders) - 1 - len([c for c in survivors if c != baseline]))
    entering = challengers[:seats]
    if n_race < protocol.race_blocks and (n_race < MIN_RACE_BLOCKS or survivors or entering):
        members = [c for c in [leader, *survivors, *entering] if c != baseline]
        if members:
            return Race(**standing, next_block=tuple(members), why="racing")
    extra = protocol.extra_blocks
    most = protocol.race_blocks + extra
    tie, past = None, bool(extra and protocol.race_blocks <= n_race <= most and survivors)
    if past and any(m.phase == CONFIRM for m in measurements):
        # Stopped already: why, as decided before confirmation's spreads reached the variance model. Where those
        # spreads revive a contender the last look had dropped (a two-level process's spread, seen at last), it is
        # listed as not told apart, on all the evidence, and the race does not resume (a resumed race could change
        # the leader after its confirmation). Leaving confirmation out of the race's variance model gained power but
        # broke ties with a two-level member past the 5% bound (docs/evidence.md, "Evidence: the race").
        before = race([m for m in measurements if m.phase != CONFIRM], baseline, eligible, protocol, techniques,
                      screen)
        revived = [str(c) for c in survivors if c not in before.contenders]
        tie = before.why + (f"; with the confirmation blocks' spreads, not told apart from it: {', '.join(revived)}"
                            if revived else "")
    elif past:  # undecided: the leader and its closest, on while more blocks could change the answer
        tie = _past_planned(standing, survivors[0], most - n_race,
                            look_alpha(most - MIN_RACE_BLOCKS + 1, _looks(protocol), extra=extra), k, protocol,
                            techniques)
        if tie is None:
            members = [c for c in (leader, survivors[0]) if c != baseline]
            return Race(**standing, next_block=tuple(members), why="racing on past the planned blocks")
    why = tie or (f"the race stopped at its maximum of {count(most, 'block')}"
                  + (f" with {len(survivors)} not told apart from the leader" if survivors else "")
                  if n_race >= most and survivors else
                  f"the leader was told apart from every other by paired contrasts after {count(n_race, 'race block')}"
                  if not survivors else "no contender other than the baseline is left")
    unseated = opening.never_raced(measurements, baseline, eligible, techniques, raced, challengers, protocol, screen)
    return _confirm(measurements, standing, why, challengers, baseline, protocol, techniques, unseated)


def _past_planned(standing: _Standing[Key], closest: Key, left: int, alpha: float, k: int, protocol: ProtocolSettings,
                  techniques: Callable[[Key], frozenset]) -> str | None:
    """Past the planned race blocks with the leader and `closest` (and perhaps others) not told apart: None to take
    another block, else why the race stops there, with the tie's bound. It stops where the `left` blocks it may
    still take could not tell the two apart at the last look's `alpha` over `k` and the leader is within the margin
    of every member still in (`ablate.stats.race.equivalence.settled`), or where none is left."""
    leader, contenders = standing["leader"], standing["contenders"]
    pair = next((c for c in standing["contrasts"] if c.other == closest and c.se is not None), None)
    still = [c for c in standing["contrasts"] if c.other in contenders]
    simpler = sum(len(techniques(c)) < len(techniques(leader)) for c in contenders)
    design = equivalence.resolution(pair, protocol.confirm_blocks or pair.blocks, EQUIVALENCE_ALPHA / max(1, simpler),
                                    protocol.equivalence_margin) if pair else None
    margin = equivalence.effective_margin(design, protocol.equivalence_margin)
    allowed = equivalence.bound(pair) if pair else None
    tie = (f"not shown equivalent to {closest} (the data allow up to {percent(allowed - 1, signed=True)})"
           if allowed is not None and allowed > 1 + margin else
           f"shown within {percent(margin)} of {closest} (either at most {percent(allowed - 1, signed=True)})"
           if allowed is not None else f"{closest} not compared")
    blocks = count(standing["race_blocks"], "race block")
    if pair is not None and equivalence.settled(pair, still, left, alpha, k, margin):
        return (f"the race stopped after {blocks}: more could not tell its leader and {closest} apart, and the "
                f"leader is within {percent(margin)} of every member still in (one-sided); {tie}")
    if left > 0:
        return None
    ended = f"at its maximum of {count(standing['race_blocks'], 'block')}"
    return f"the race stopped {ended} with {count(len(contenders), 'member')} not told apart from the leader; {tie}"


def _confirm(measurements: Sequence[Measurement[Key]], standing: _Standing[Key], why: str, pending: list[Key],
             baseline: Key, protocol: ProtocolSettings, techniques: Callable[[Key], frozenset],
             not_raced: tuple[Key, ...] = ()) -> Race[Key]:
    """After the race: blocks of the leader, the simplest of the set and the baseline, none seen by selection."""
    done = len({m.block for m in measurements if m.phase == CONFIRM})
    leader = standing["leader"]
    members = tuple(dict.fromkeys(c for c in (leader, simplest([leader, *standing["contenders"]], techniques))
                                  if c != baseline))
    more = done < protocol.confirm_blocks or (done < protocol.most_confirm_blocks and _unconfirmed(
        measurements, baseline, leader, standing["contenders"], protocol.confirm_blocks, techniques))
    nxt = members if members and more else None
    differences = from_baseline(measurements, baseline)
    raced = [c for c in (leader, *standing["contenders"], *standing["eliminated"]) if c != baseline]
    return Race(**standing, next_block=nxt, why=why, phase=CONFIRM, pending=tuple(pending), confirm_blocks=done,
                not_raced=not_raced, two_level=tuple(c for c in raced if two_levels(differences.get(c, []))))


def _unconfirmed(measurements: Sequence[Measurement[Key]], baseline: Key, leader: Key, contenders: Sequence[Key],
                 planned: int, techniques: Callable[[Key], frozenset]) -> bool:
    """The baseline is in the leader's set and the `planned` confirmation blocks read the leader no faster than it:
    as many blocks again decide (`ablate.stats.answer.verdicts`: on all of them the baseline stands in where the
    leader still reads no faster). Judged on the planned blocks alone, so the extra ones are taken whole."""
    if leader == baseline or baseline not in contenders:
        return False
    first = confirmation.planned(measurements, planned)
    k = confirmation.confirmed(first, baseline, leader, [baseline], techniques).get(baseline)
    return k is not None and k.diff <= 0


def _unraced(measurements: Sequence[Measurement[Key]], baseline: Key, est: dict[Key, Estimate],
             protocol: ProtocolSettings, screen: factorial.Fit[Key] | None = None) -> Race[Key]:
    """A full design: the leader of the estimates, its contrasts paired over every block (one look: all the alpha).
    Screening only (the single pass too): the screening model's best measured eligible one where a model was fitted
    (the largest single estimate is mostly the luckiest: tests/stats/test_factorial.py), else the estimates' leader."""
    leader = max(sorted(est, key=str), key=lambda c: est[c].log)
    if protocol.full_blocks:
        values = by_block(measurements, FULL)
        blocks = sorted({b for by in values.values() for b in by})
        field = [c for c in est if c in values]
        leader, contrasts, out = _look(values, baseline, field, blocks, ALPHA)  # own spreads: every block shared
        still = tuple(sorted((c for c in field if c != leader and c not in out), key=lambda c: (-est[c].log, str(c))))
        return Race(leader, still, 0, None, "no racing in this protocol", contrasts=tuple(contrasts),
                    eliminated=tuple(sorted(out, key=str)),
                    dropped_by=tuple(c for c in sorted(contrasts, key=lambda c: str(c.other)) if c.apart))
    if predicted := _modelled(screen, est):
        leader = max(sorted(predicted, key=str), key=lambda c: predicted[c])
        return Race(leader, (), 0, None, "no racing in this protocol; the leader is the screening model's best, "
                                         "fitted to every combination's reading", by_model=True)
    return Race(leader, (), 0, None, "no racing in this protocol")


def _modelled(screen: factorial.Fit[Key] | None, among: Container[Key]) -> dict[Key, float]:
    """The screening model's predicted log speed-up of each of `among` (none without a model)."""
    return {c: p.log for c, p in screen.predictions.items() if c in among} if screen else {}


def simplest(members: Sequence[Key], techniques: Callable[[Key], frozenset]) -> Key:
    """The member with the fewest techniques (ties: the earlier, i.e. the faster, in `members`)."""
    return min(enumerate(members), key=lambda ic: (len(techniques(ic[1])), ic[0]))[1]

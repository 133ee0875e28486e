"""Which cells screening measures: a regular two-level fraction of the grid, resolution IV or better.

Why: screening measured every runnable combination once, and on mnist_cnn's CPU grid (workers x batch x
set_to_none x bf16, two levels each, x graph off/torchscript/compile) that is 48 cells, about a third of a
study's wall time. Throughput is mostly main effects and a few two-factor interactions (effect sparsity and
hierarchy: Box, Hunter & Hunter, Statistics for Experimenters, 2nd ed., ch. 6), so half of those cells, chosen
as a regular fraction, estimate the same model (`ablate.stats.screening.factorial`) and rank all 48.

- **Resolution IV or better.** The fraction's defining relation (every product of its generator words) has
  no word shorter than four letters: no main effect is aliased with another main effect or with a two-factor
  interaction, so each technique's effect is estimated clear of the pairs; two-factor interactions are aliased
  in chains with one another (resolution IV; resolution V separates them too). A resolution III fraction would
  alias a technique with a pair of others, and a strong pair (bf16 x batch) would pass for a technique.
- **The generators** are the minimum-aberration designs of the standard tables (Montgomery, Design and Analysis
  of Experiments, 8th ed., Table 8.14; Box, Hunter & Hunter, 2nd ed., ch. 6): among the designs of a resolution,
  the fewest shortest words, so the fewest aliased pairs. The first two-level dimensions in the study's order
  are the base factors and the last ones generated, so the fraction is fixed by the study file, never by a
  seed; each generator is signed so that the baseline's cell (every factor at its low level, coded -1) is in it.
- **How small.** The most fractioned design of the table that leaves `SPARE` cells beyond every term the
  screening model (`ablate.stats.screening.factorial`) may take: a main effect per technique, one term per alias chain
  of pairs, and every pair with a dimension of three or more levels (crossed in full, so each of its levels
  holds the same fraction of the others).
- **When not.** A grid where a conflict removed cells is no product of factors, so no regular fraction of it
  exists: every runnable cell is screened; likewise with fewer than four two-level dimensions (no
  resolution IV fraction of three is smaller than their grid), more than the table's eight, or where no design
  leaves the model its spare cells (four two-level dimensions alone: 8 cells for 8 terms).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce
from itertools import combinations
from typing import Collection, Mapping

from ablate.config.choices import Levels, Option

SPARE = 4  # cells a fraction leaves beyond every term the screening model may take (its residual's)
MIN_FACTORS = 4  # the fewest two-level dimensions a resolution IV fraction saves cells on

# Generator words over the base factors (A = the first two-level dimension, ...), one word per generated factor
# (the last p dimensions, in order), most fractioned design first: Montgomery Table 8.14 (minimum aberration;
# tests/stats/test_fraction.py checks each is of minimum aberration among every choice of generators).
TABLE: dict[int, tuple[tuple[str, ...], ...]] = {
    4: (("ABC",),),  # 2^(4-1) IV
    5: (("ABCD",),),  # 2^(5-1) V
    6: (("ABC", "BCD"), ("ABCDE",)),  # 2^(6-2) IV, 2^(6-1) VI
    7: (("ABC", "BCD", "ACD"), ("ABCD", "ABDE"), ("ABCDEF",)),  # 2^(7-3) IV, 2^(7-2) IV, 2^(7-1) VII
    8: (("BCD", "ACD", "ABC", "ABD"), ("ABC", "ABD", "BCDE"), ("ABCD", "ABEF")),  # 2^(8-4) IV, 2^(8-3) IV, 2^(8-2) V
}
ROMAN = {4: "IV", 5: "V", 6: "VI", 7: "VII", 8: "VIII"}
NAMES = {2: "half", 4: "quarter"}


@dataclass(frozen=True)
class Fraction:
    """The cells screening measures, and how they were chosen."""

    cells: tuple[Levels, ...]  # the runnable cells screening measures (the baseline's cell among them)
    rest: tuple[Levels, ...]  # the runnable cells it leaves out (the fold-over measures these)
    factors: tuple[str, ...]  # the two-level dimensions fractioned (study-file order)
    generators: tuple[str, ...]  # e.g. ("amp = num_workers x batch_size x set_to_none",) for the report
    resolution: int  # 4 or more

    def describe(self) -> str:
        total = len(self.cells) + len(self.rest)
        share = round(total / len(self.cells))
        name = NAMES.get(share, f"1/{share}")
        return (f"a {name} fraction (resolution {ROMAN.get(self.resolution, str(self.resolution))}: "
                f"{'; '.join(self.generators)}) of the {total} runnable combinations: {len(self.cells)}")


def words(k: int, generators: tuple[str, ...]) -> list[frozenset[int]]:
    """The defining relation of a design of k factors: every product of its generator words (as factor indices;
    the generated factors follow the k - p base ones)."""
    base = k - len(generators)
    found = [frozenset(ord(ch) - ord("A") for ch in g) | {base + i} for i, g in enumerate(generators)]
    return [reduce(lambda a, b: a ^ b, chosen) for r in range(1, len(found) + 1) for chosen in combinations(found, r)]


def resolution(k: int, generators: tuple[str, ...]) -> int:
    """The length of the defining relation's shortest word."""
    return min(len(w) for w in words(k, generators))


def pair_chains(k: int, generators: tuple[str, ...]) -> int:
    """How many distinct alias chains the k factors' two-factor interactions fall in (each a term of the model):
    a pair's aliases are the pair times each word of the defining relation."""
    relation = words(k, generators)
    seen: set[frozenset[frozenset[int]]] = set()
    for pair in combinations(range(k), 2):
        chain = {frozenset(pair)} | {frozenset(pair) ^ w for w in relation if len(frozenset(pair) ^ w) == 2}
        seen.add(frozenset(chain))
    return len(seen)


def _terms(k: int, generators: tuple[str, ...], crossed: list[int]) -> int:
    """The model's terms on the fraction: intercept, main effects, the pairs' alias chains, and every pair with a
    crossed dimension (`crossed`: their runnable level counts)."""
    mains = k + sum(n - 1 for n in crossed)
    with_crossed = sum((a - 1) * (b - 1) for a, b in combinations([2] * k + crossed, 2)) - math.comb(k, 2)
    return 1 + mains + pair_chains(k, generators) + with_crossed


def screening_fraction(options: Mapping[str, Mapping[str, Option]], runnable: Collection[Levels],
                       baseline: Levels) -> Fraction | None:
    """The fraction of `runnable` screening measures (`options`: `Study.choices`, the study's order), or
    None: screen every runnable cell (see the module's "when not")."""
    cells = list(dict.fromkeys(runnable))
    if baseline not in cells:
        return None
    levels: dict[str, list[str]] = {d: [] for d in options}
    for cell in cells:
        for d, label in cell:
            if label not in levels.setdefault(d, []):
                levels[d].append(label)
    if math.prod(len(v) for v in levels.values()) != len(cells):  # a conflict removed some: no product
        return None
    factors = [d for d, v in levels.items() if len(v) == 2]
    crossed = [len(v) for v in levels.values() if len(v) > 2]
    designs = TABLE.get(len(factors))
    if designs is None:
        return None
    fitting = [g for g in designs if 2 ** (len(factors) - len(g)) * math.prod(crossed)
               >= _terms(len(factors), g, crossed) + SPARE]
    if not fitting:
        return None
    generators = fitting[0]
    low = dict(baseline)
    base = len(factors) - len(generators)
    kept = tuple(c for c in cells if all(_holds(dict(c), low, factors, g, base + i)
                                          for i, g in enumerate(generators)))
    named = tuple(f"{factors[base + i]} = {'' if len(g) % 2 else '-('}"
                  f"{' x '.join(factors[ord(ch) - ord('A')] for ch in g)}{'' if len(g) % 2 else ')'}"
                  for i, g in enumerate(generators))
    chosen = set(kept)
    rest = tuple(c for c in cells if c not in chosen)
    return Fraction(kept, rest, tuple(factors), named, resolution(len(factors), generators))


def _holds(cell: Mapping[str, str], low: Mapping[str, str], factors: list[str], word: str, generated: int) -> bool:
    """The cell satisfies generator `word` for factor `generated`: its level, coded -1 at the baseline's and +1
    otherwise, equals the word's product, signed so that the all-low cell satisfies it."""
    def coded(i: int) -> int:
        return -1 if cell[factors[i]] == low[factors[i]] else 1

    sign = (-1) ** (len(word) + 1)  # the all-low cell: -1 = sign * (-1)^len(word)
    return coded(generated) == sign * math.prod(coded(ord(ch) - ord("A")) for ch in word)

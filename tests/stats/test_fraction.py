"""The screening fraction (`ablate.stats.screening.fraction`): resolution IV or better, the baseline's cell in it, fixed
by the study's dimension order, and None where no regular fraction fits the grid."""
from __future__ import annotations

import random
from itertools import combinations

import numpy as np
import pytest

from ablate.config.choices import Levels, Option, baseline_levels, grid
from ablate.stats.screening import fraction
from ablate.stats.screening.fraction import TABLE, screening_fraction


def _options(two_level: int, crossed: tuple[int, ...] = ()) -> dict[str, dict[str, Option]]:
    """`two_level` dimensions of off and one strategy, then dimensions of off and n - 1 strategies each."""
    out: dict[str, dict[str, Option]] = {}
    for i in range(two_level):
        out[f"f{i}"] = {"off": Option(None), f"s{i}": Option(f"s{i}")}
    for j, n in enumerate(crossed):
        out[f"g{j}"] = {"off": Option(None), **{f"g{j}_{v}": Option(f"g{j}_{v}") for v in range(1, n)}}
    return out


def _coded(cells: tuple[Levels, ...], factors: tuple[str, ...], baseline: Levels) -> np.ndarray:
    """cells x factors: -1 at the baseline's level, +1 at the other."""
    low = dict(baseline)
    return np.array([[-1 if dict(c)[f] == low[f] else 1 for f in factors] for c in cells])


def _resolution_iv(x: np.ndarray) -> bool:
    """No main-effect column equals (up to sign) another's or a two-factor product's, within each level combination
    of the crossed dimensions as over all (the cells are a product with them)."""
    k = x.shape[1]
    products = [x[:, i] * x[:, j] for i, j in combinations(range(k), 2)]
    for i in range(k):
        others = [x[:, j] for j in range(k) if j != i] + [p for (a, b), p in zip(combinations(range(k), 2), products)
                                                          if i not in (a, b)]
        if any(abs(x[:, i] @ o) == len(x) for o in others):
            return False
    return True


def test_mnist_cpu_grid_is_halved_at_resolution_iv_with_the_baseline_in():
    options = {**_options(4), "pin": {"off": Option(None), "pin": Option("pin_memory")},
               "graph": {"off": Option(None), "torchscript": Option("torchscript"), "compile": Option("compile")}}
    runnable = [c for c in grid(options) if dict(c)["pin"] == "off"]  # pin_memory cannot run on a CPU
    found = screening_fraction(options, runnable, baseline_levels(options))
    assert found is not None
    assert len(found.cells) == 24 and len(found.rest) == 24 and found.resolution == 4
    assert baseline_levels(options) in found.cells
    assert found.factors == ("f0", "f1", "f2", "f3")
    assert found.generators == ("f3 = f0 x f1 x f2",)
    assert found.describe() == "a half fraction (resolution IV: f3 = f0 x f1 x f2) of the 48 runnable combinations: 24"
    assert _resolution_iv(_coded(found.cells, found.factors, baseline_levels(options)))


@pytest.mark.parametrize("k", [4, 5, 6, 7, 8])
@pytest.mark.parametrize("crossed", [(), (3,)])
def test_k_two_level_factors_give_a_resolution_iv_fraction_holding_the_baseline(k, crossed):
    options = _options(k, crossed)
    runnable, baseline = grid(options), baseline_levels(options)
    found = screening_fraction(options, runnable, baseline)
    if found is None:  # only where no design of the table leaves the model SPARE cells: the saturated small ones
        assert not crossed and k in (4, 5)
        return
    assert baseline in found.cells
    assert set(found.cells) | set(found.rest) == set(runnable) and not set(found.cells) & set(found.rest)
    assert len(found.cells) < len(runnable) and found.resolution >= 4
    generators = next(g for g in TABLE[k] if len(runnable) // len(found.cells) == 2 ** len(g))
    assert min(len(w) for w in fraction.words(k, generators)) == found.resolution
    x = _coded(found.cells, found.factors, baseline)
    assert _resolution_iv(x)
    if crossed:  # crossed in full: every level of the crossed dimension holds the same fraction
        by_level = {}
        for c, row in zip(found.cells, x):
            by_level.setdefault(dict(c)["g0"], set()).add(tuple(row))
        assert len({frozenset(v) for v in by_level.values()}) == 1 and len(by_level) == 3


def _pattern(k: int, generators: tuple[str, ...]) -> tuple[int, ...]:
    """The word-length pattern: how many words of the defining relation have length 3, 4, ..., k."""
    lengths = [len(w) for w in fraction.words(k, generators)]
    return tuple(lengths.count(n) for n in range(3, k + 1))


@pytest.mark.parametrize("k, generators", [(k, g) for k, designs in TABLE.items() for g in designs])
def test_the_table_holds_minimum_aberration_designs(k, generators):
    """Every choice of p generator words over the k - p base factors: none has a smaller word-length pattern
    (fewer short words, lexicographically from length 3) than the table's (Montgomery Table 8.14)."""
    base = k - len(generators)
    letters = "ABCDEFGH"[:base]
    candidates = ["".join(w) for n in range(2, base + 1) for w in combinations(letters, n)]
    best = min(_pattern(k, g) for g in combinations(candidates, len(generators)))
    assert _pattern(k, generators) == best


def test_a_grid_a_conflict_removed_cells_from_is_screened_in_full():
    options = _options(5)
    runnable = grid(options)
    runnable.remove(next(c for c in runnable if dict(c)["f0"] != "off" and dict(c)["f1"] != "off"))
    assert screening_fraction(options, runnable, baseline_levels(options)) is None


def test_fewer_than_four_two_level_dimensions_are_screened_in_full():
    options = _options(3, (3, 3))
    assert screening_fraction(options, grid(options), baseline_levels(options)) is None


def test_the_fraction_is_fixed_by_the_dimension_order_not_the_order_of_the_cells():
    options = _options(4, (3,))
    runnable, baseline = grid(options), baseline_levels(options)
    first = screening_fraction(options, runnable, baseline)
    shuffled = list(runnable)
    random.Random(1).shuffle(shuffled)
    again = screening_fraction(options, shuffled, baseline)
    assert first is not None and again is not None
    assert set(first.cells) == set(again.cells) and first.generators == again.generators
    reordered = dict(reversed(list(options.items())))  # another study order fractions other factors
    other = screening_fraction(reordered, runnable, baseline)
    assert other is not None and other.factors == ("f3", "f2", "f1", "f0") and baseline in other.cells


def test_every_cell_of_the_fraction_satisfies_each_signed_generator():
    """The generated factors are the products of their words, signed so the all-low cell satisfies them: an even
    word's product is +1 there, so its generator is reversed."""
    options = _options(5, (3,))
    found = screening_fraction(options, grid(options), baseline_levels(options))
    assert found is not None and found.generators == ("f4 = -(f0 x f1 x f2 x f3)",) and found.resolution == 5
    x = _coded(found.cells, found.factors, baseline_levels(options))
    assert np.all(x[:, 4] == -np.prod(x[:, :4], axis=1)) and len(x) == 48


def test_a_dimension_of_one_runnable_level_is_no_factor():
    options = _options(4, (3,))
    options["pin"] = {"off": Option(None), "pin": Option("pin_memory")}
    runnable = [c for c in grid(options) if dict(c)["pin"] == "off"]
    found = screening_fraction(options, runnable, baseline_levels(options))
    assert found is not None and "pin" not in found.factors and len(found.cells) == 24
    assert all(dict(c)["pin"] == "off" for c in (*found.cells, *found.rest))

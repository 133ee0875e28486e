"""The report's figures and text read at a glance: no label over a label, no legend over a point, no empty section."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest

from ablate.render import effects, plots
from ablate.stats.answer.comparison import Comparison, DeviceComparisons, machine_load
from ablate.stats.parity import Parity
from ablate.stats.screening.effects import Effect, EffectFit
from ablate.stats.speedups import Interval
from ablate.store.records import Record
from ablate.words import count


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plotting functions draw, kept open (and drawn) for inspection."""
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: (fig.canvas.draw(), figures.append(fig), path)[2])
    yield figures
    for fig in figures:
        plt.close(fig)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("span", [(0.02, 5.0), (0.7, 1.4), (0.85, 1.15), (0.3, 3.0), (0.05, 50.0)])
def test_factor_axis_tick_labels_never_touch(span):
    fig, ax = plt.subplots(figsize=(11, 3))
    ax.set_xlim(*span)
    plots._factor_axis(ax)
    fig.canvas.draw()
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    boxes = [t.get_window_extent() for t in labels]
    plt.close(fig)
    assert len(labels) >= 2, [t.get_text() for t in labels]
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), [t.get_text() for t in labels]


def _record(number: int, name: str, throughput: float, accuracy: float) -> Record:
    return Record(number, name, {}, "complete", metrics={"throughput": throughput, "test_accuracy": accuracy})


def test_pareto_legend_covers_no_point(drawn, tmp_path):
    base = _record(0, "baseline", 100, 92.0)
    # Points in every corner, where a legend inside the axes would sit.
    records = [base, _record(1, "a", 60, 85.0), _record(2, "b", 400, 85.2), _record(3, "c", 61, 92.1),
               _record(4, "d", 390, 92.2)]
    below = Parity("below", -1.0, -1.5, -0.6, 2, 0.2, 1.0, tolerance=0.5)
    rows = tuple(Comparison(r, None, r.throughput, below if r.number in (1, 2) else None, None) for r in records)
    compared = DeviceComparisons("cpu", records, rows, None, 0.5, {}, machine_load(records, None))
    plots.pareto_chart(tmp_path / "p.png", compared, 4, "t")
    ax = drawn[0].axes[0]
    legend = ax.get_legend().get_window_extent()
    points = ax.transData.transform([(r.throughput, r.accuracy) for r in records])
    assert not any(legend.x0 <= x <= legend.x1 and legend.y0 <= y <= legend.y1 for x, y in points)


def _fit(with_pairs: bool) -> EffectFit:
    main = [Effect(("amp",), ("amp",), Interval(0.1, 0.0, 0.2), 0.04), Effect(("compile",), ("graph",),
                                                                                  Interval(0.2, 0.1, 0.3), 0.01)]
    pair = [Effect(("amp", "compile"), ("amp", "graph"), Interval(0.0, -0.1, 0.1), 0.9)] if with_pairs else []
    return EffectFit("log throughput", tuple(main + pair), 8, 3, True, with_pairs, "note.")


@pytest.mark.parametrize("with_pairs", [True, False])
def test_effects_title_and_tables_show_interactions_only_when_fitted(drawn, tmp_path, with_pairs):
    plots.effects_chart(tmp_path / "e.png", _fit(with_pairs), "too few", "t")
    title = drawn[0]._suptitle.get_text()
    assert ("interactions" in title) == with_pairs, title
    text = "\n".join(effects.section(_fit(with_pairs), "too few", []))
    assert ("| interaction |" in text) == with_pairs
    assert ("an interaction (a x b)" in text) == with_pairs


def test_counted_nouns_agree():
    assert [count(1, "block"), count(2, "block"), count(1.0, "technique"), count(0, "run"), count(1500, "step")] == [
        "1 block", "2 blocks", "1 technique", "0 runs", "1,500 steps"]
    assert not math.isnan(float(count(2.5, "x").split()[0]))

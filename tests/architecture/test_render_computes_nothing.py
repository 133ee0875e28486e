"""render/ computes nothing: every figure a surface shows is computed once in stats/ (the comparisons,
`ablate.stats.answer.comparison`, and the findings beside them, `ablate.stats.answer.findings`), and the terminal, the
report, summary.json, the plots and MLflow all render those.

The rule, read off the source with `ast` (function-level imports too) and checked against the objects it names:
- a render/ module takes from ablate.stats only result types and constants: every name it imports from a stats
  module, or reads off a stats module it imports whole, is a class or an UPPER_CASE value that is not callable;
- it calls none of them, nor reads a function off one of those classes: render/ reads results, it neither builds
  them nor runs a class's own code but through an instance it was handed;
- it imports no statistics library (numpy, scipy, statsmodels).

So no function of stats/ that computes, and no statistics library, can be reached from render/. What the rule cannot
see: a result type's own methods called on an instance (an interval read off an estimate), which belong to the result.

tracking/ is held to the same rule: run/ computes the comparisons and the findings once (`ablate.run.stored_study`)
and hands them to tracking/, which logs them, so MLflow shows the figures every other surface shows.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

RENDER = Path(__file__).resolve().parents[2] / "ablate" / "render"
TRACKING = RENDER.parent / "tracking"
STATS = "ablate.stats"
LIBRARIES = {"numpy", "scipy", "statsmodels"}


def _stats_module(name: str) -> ModuleType | None:
    """The stats module `name` names, or None where it is not one (a name inside a module)."""
    if name != STATS and not name.startswith(f"{STATS}."):
        return None
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        return None


def _result(obj: object, name: str) -> bool:
    """A result type or a constant: what render/ may take from stats/."""
    return isinstance(obj, type) or (name.isupper() and not callable(obj))


def _resolved(expr: ast.expr, bound: dict[str, object]) -> object:
    """What `expr` names in stats/ (a module, a class, a function, a constant), `VALUE` for what is read off a
    constant (its own methods: a dict's `items`), or None where it is not from stats/ at all."""
    if isinstance(expr, ast.Name):
        return bound.get(expr.id)
    if isinstance(expr, ast.Attribute):
        owner = _resolved(expr.value, bound)
        if owner is None or owner is VALUE:
            return owner
        if isinstance(owner, (ModuleType, type)):
            return _stats_module(f"{owner.__name__}.{expr.attr}") or getattr(owner, expr.attr, MISSING)
        return VALUE
    return None


VALUE, MISSING = object(), object()


def violations(source: str, where: str) -> list[str]:
    """Every breach of the rule in a render/ module's `source` (`where`: its name, for the messages)."""
    tree = ast.parse(source)
    found: list[str] = []
    bound: dict[str, object] = {}  # local name -> the stats module, class or constant bound to it
    for node in ast.walk(tree):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    found.append(f"{at}: imports {alias.name}, a statistics library")
                elif (module := _stats_module(alias.name)) is not None:
                    if alias.asname is None:  # `import ablate.stats.x` binds `ablate`: name what it takes instead
                        found.append(f"{at}: imports {alias.name} whole; import the result types it needs by name")
                    else:
                        bound[alias.asname] = module
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] in LIBRARIES:
                found.append(f"{at}: imports from {node.module}, a statistics library")
                continue
            for alias in node.names:
                # A module: `from ablate.stats import parity`, `from ablate import stats`.
                if (sub := _stats_module(f"{node.module}.{alias.name}")) is not None:
                    bound[alias.asname or alias.name] = sub
                elif (module := _stats_module(node.module)) is not None:
                    obj = getattr(module, alias.name)
                    bound[alias.asname or alias.name] = obj
                    if not _result(obj, alias.name):
                        found.append(f"{at}: imports {alias.name} from {node.module}: neither a result type nor a "
                                     "constant")
    for node in ast.walk(tree):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and isinstance(_resolved(node.value, bound), (ModuleType, type)):
            read = _resolved(node, bound)
            if not isinstance(read, ModuleType) and not _result(read, node.attr):
                found.append(f"{at}: reads {ast.unparse(node)}: neither a result type nor a constant of stats/")
        if isinstance(node, ast.Call) and (called := _resolved(node.func, bound)) is not None and called is not VALUE:
            found.append(f"{at}: calls {ast.unparse(node.func)}, which stats/ owns")
    return found


def _render_modules() -> list[Path]:
    return sorted(RENDER.glob("*.py"))


@pytest.mark.parametrize("path", _render_modules(), ids=lambda p: p.name)
def test_render_takes_only_result_types_and_constants_from_stats_and_calls_no_statistics(path: Path) -> None:
    assert violations(path.read_text(), f"ablate/render/{path.name}") == []


def test_render_has_modules_to_check() -> None:
    assert {"report.py", "method.py", "summaries.py", "answer.py", "plots.py"} <= {p.name for p in _render_modules()}


@pytest.mark.parametrize("path", sorted(TRACKING.glob("*.py")), ids=lambda p: p.name)
def test_tracking_logs_what_run_computed_and_calls_no_statistics(path: Path) -> None:
    assert violations(path.read_text(), f"ablate/tracking/{path.name}") == []


def test_tracking_has_the_modules_that_log_the_analysis() -> None:
    assert {"parent_run.py", "sync.py", "view.py"} <= {p.name for p in TRACKING.glob("*.py")}


@pytest.mark.parametrize("source", [
    "from ablate.stats.screening.effects import fit_effects",  # a function that computes
    "from ablate.stats.answer.findings import analyse_all",
    "from ablate.stats.answer.explained import explain",
    "from ablate.stats import protocol\nprotocol.baseline_cv([], 'baseline')",  # read off a module
    "from ablate.stats.answer import costs as c\nx = c.break_even",
    "import ablate.stats.protocol as p\np.estimates([], 'baseline')",
    "import ablate.stats.answer.comparison",
    "from ablate import stats\nstats.compare([], 0.5)",
    "from ablate.stats.speedups import Interval\nInterval(1.0, 0.5, 2.0)",  # building a result, not reading one
    "from ablate.stats.speedups import Speedup\nSpeedup.over",  # a class's own function, read off it...
    "from ablate.stats.answer.comparison import DeviceComparisons\nDeviceComparisons.get(None, 'x')",  # ...or called
    # in a function:
    "def f():\n    from ablate.stats.answer.comparison import compare_stored\n    return compare_stored",
    "import numpy as np\nnp.mean([1.0])",
    "from scipy import stats",
    "from statsmodels.api import OLS",
])
def test_the_rule_fails_a_module_that_computes(source: str) -> None:
    assert violations(source, "probe.py")


def test_the_rule_passes_result_types_constants_and_their_use() -> None:
    source = ("from ablate.stats import parity\n"
              "from ablate.stats.screening.effects import EffectFit\n"
              "from ablate.stats.protocol import CONFIDENCE\n"
              "from ablate.stats.speedups import Interval\n"
              "from ablate.stats.diagnosis import WORDS\n"
              "def f(fit: EffectFit | str, i: Interval, p: parity.Parity) -> str:\n"
              "    return f'{CONFIDENCE} {WORDS} {parity.WIDEN_AT} {isinstance(fit, EffectFit)} {i.low} {p.label}'\n")
    assert violations(source, "probe.py") == []

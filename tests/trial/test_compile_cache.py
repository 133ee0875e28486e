"""One compile cache per graph: siblings that compile the same graph share it, Inductor's counters say who compiled
cold, and a failed measurement leaves nothing a sibling could start warm from."""
from __future__ import annotations

import os
import sys
import types
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from tiny_mnist import tiny_study

from ablate.config import study as studies
from ablate.config.choices import Option
from ablate.trial import compile_cache
from ablate.trial.process import TrialSpec, run_in_fresh_process
from strategies import REGISTRY, Strategy

COMPILE = Option("compile")
# Hooks through which a strategy reaches the compiled model or optimizer step.
GRAPH_HOOKS = ("prepare_model", "prepare_optimizer", "autocast", "backward", "step")


def test_only_combinations_with_a_one_off_cost_and_no_autotuning_reuse_a_cache():
    assert compile_cache.reusable((COMPILE,))
    assert compile_cache.reusable((Option("set_to_none"), Option("compile", (("mode", "default"),))))
    assert not compile_cache.reusable((Option("compile", (("mode", "max-autotune-no-cudagraphs"),)),))
    assert not compile_cache.reusable((Option("set_to_none"), Option(None)))


@pytest.mark.parametrize("name", ["cudnn_benchmark", "device_resident_data", "torchscript"])
def test_a_one_off_cost_that_nothing_keeps_across_processes_is_never_labelled_warm(name):
    # cuDNN's autotuning, moving the data and TorchScript's profiling runs are paid again by every process: a
    # folder for them would mark every later measurement compile_cache_warm with nothing in it.
    assert Option(name).one_off_cost and not compile_cache.reusable((Option(name),))


def test_a_cache_persists_where_inductor_compiles():
    assert compile_cache.reusable((Option("compiled_optimizer"),))
    assert compile_cache.reusable((Option("cuda_graphs"),))
    assert compile_cache.reusable((Option("float8_compile", preset=True),))
    assert compile_cache.reusable((Option("cudnn_benchmark"), COMPILE))
    assert not compile_cache.reusable((Option("cuda_graphs", (("kernels", "eager"),)),))  # the cudagraphs backend
    assert not compile_cache.reusable((Option("compile", (("backend", "aot_eager"),)),))


def test_siblings_that_differ_only_in_loader_or_zero_grad_options_share_a_graph_key():
    workers = Option("num_workers", (("n", 2),))
    siblings = [(Option(None), COMPILE), (workers, COMPILE), (Option("set_to_none"), COMPILE),
                (workers, Option("pin_memory"), Option("set_to_none"), COMPILE)]
    assert {compile_cache.graph_key(s) for s in siblings} == {"compile"}


@pytest.mark.parametrize("changes", [Option("amp", (("dtype", "bf16"),)), Option("amp", (("dtype", "fp16"),)),
                                     Option("batch_size", (("n", 128),)), Option("channels_last"),
                                     Option("compiled_optimizer"), Option("tf32")])
def test_an_option_that_changes_the_compiled_graph_is_in_the_key(changes):
    assert compile_cache.graph_key((changes, COMPILE)) != compile_cache.graph_key((COMPILE,))
    assert compile_cache.graph_key((Option("compile", (("mode", "reduce-overhead"),)),)) != "compile"


def test_the_graph_neutral_strategies_reach_no_compiled_region():
    # The key's argument in code: each acts through the loader, the copy or the gradients' reset only. A strategy
    # that overrode a hook reaching the compiled model or optimizer step could not be graph-neutral.
    for name in compile_cache.GRAPH_NEUTRAL:
        overridden = {h for h in GRAPH_HOOKS if getattr(REGISTRY[name], h) is not getattr(Strategy, h)}
        assert not overridden, (name, overridden)
        assert not REGISTRY[name].changes_numerics


def test_siblings_share_a_folder_and_each_search_graph_device_and_torch_has_its_own(tmp_path):
    # A search sharing another's folder (the grid, then `--search optuna` in the same results folder) would start
    # every compiled combination warm: it would have no cold measurement to take the one-off cost from.
    key = compile_cache.graph_key
    one = compile_cache.folder(tmp_path, "s:grid:cpu", key((COMPILE,)), "cpu", "2.9")
    assert one == compile_cache.folder(tmp_path, "s:grid:cpu", key((Option("set_to_none"), COMPILE)), "cpu", "2.9")
    assert len({one, compile_cache.folder(tmp_path, "s:grid:cpu", key((Option("amp"), COMPILE)), "cpu", "2.9"),
                compile_cache.folder(tmp_path, "s:grid:cpu", "compile", "H100", "2.9"),
                compile_cache.folder(tmp_path, "s:grid:cpu", "compile", "cpu", "2.10"),
                compile_cache.folder(tmp_path, "s:optuna:cpu", "compile", "cpu", "2.9")}) == 5


def _counters(monkeypatch, **counts: int) -> None:
    """Inductor's counters as `torch._dynamo.utils.counters` holds them in a trial process, faked."""
    counters: defaultdict[str, Counter] = defaultdict(Counter)
    for name, n in counts.items():
        group = "aot_autograd" if name.startswith("autograd") else "inductor"
        counters[group][name] = n
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", types.SimpleNamespace(counters=counters))


@pytest.mark.parametrize("counts, warm", [
    ({}, False),  # nothing looked up: nothing came from the cache
    ({"fxgraph_cache_miss": 2, "autograd_cache_miss": 1}, False),  # the first sibling: compiled everything
    ({"autograd_cache_hit": 1}, True),  # AOTAutograd's hit loads both graphs without Inductor's lookups
    ({"fxgraph_cache_hit": 2, "autograd_cache_hit": 1}, True),
    ({"fxgraph_cache_hit": 2, "fxgraph_cache_miss": 1}, False),  # a graph the siblings did not share: compiled
    ({"autograd_cache_hit": 1, "fxgraph_cache_bypass": 1}, False),  # uncacheable: compiled by every process
    ({"autograd_cache_hit": 1, "autograd_cache_bypass": 1}, False),
])
def test_warm_only_where_inductor_reports_hits_and_no_misses(monkeypatch, counts, warm):
    _counters(monkeypatch, **counts)
    hits, misses = compile_cache.lookups()
    assert compile_cache.warm(hits, misses) is warm
    assert hits + misses == sum(counts.values())


class _Conn:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send(self, message: tuple) -> None:
        self.sent.append(message)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("counts, warm", [({"fxgraph_cache_miss": 2, "autograd_cache_miss": 1}, 0.0),
                                          ({"autograd_cache_hit": 1}, 1.0)])
def test_a_trial_stores_what_inductor_counted_not_whether_the_folder_existed(monkeypatch, tmp_path, counts, warm):
    from ablate.trial import process

    monkeypatch.setattr(process.mp, "set_start_method", lambda *args, **kwargs: None)
    monkeypatch.setattr(process, "_channel", process._channel)  # `serve` replaces it: later tests need the idle one
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    shared = tmp_path / "compile-cache" / "key"
    shared.mkdir(parents=True)  # a sibling's folder exists either way
    conn = _Conn()

    def target(spec: object) -> dict:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(shared)  # Inductor compiles into the shared folder
        _counters(monkeypatch, **counts)  # as compiling the model would have counted
        return {}

    process.serve(conn, target, types.SimpleNamespace(compile_cache=str(shared)), 0.0)
    ((kind, metrics),) = conn.sent
    assert kind == "ok" and metrics["compile_cache_warm"] == warm
    assert metrics["compile_cache_hits"] + metrics["compile_cache_misses"] == sum(counts.values())
    assert shared.is_dir()  # kept for the graph's later siblings


def test_a_combination_without_a_cache_compiles_in_a_fresh_folder_it_removes(monkeypatch):
    # Never the user's default cache: an autotuning mode would start warm from another run's choices.
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    fresh = compile_cache.Use(None)
    path = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    assert path.is_dir() and not any(path.iterdir())
    fresh.done()
    assert not path.exists()


def test_a_failed_measurement_leaves_only_what_was_there(tmp_path):
    shared = tmp_path / "compile-cache" / "key"
    (shared / "fxgraph").mkdir(parents=True)
    (shared / "fxgraph" / "sibling").write_text("a sibling's graph")
    entries = compile_cache.Entries(shared)
    (shared / "fxgraph" / "mine").write_text("compiled by the failed measurement")
    (shared / "aotautograd" / "k").mkdir(parents=True)
    (shared / "aotautograd" / "k" / "entry").write_text("its joint graph")
    entries.discard_added()
    assert sorted(p.name for p in shared.rglob("*") if p.is_file()) == ["sibling"]
    compile_cache.Entries(tmp_path / "absent").discard_added()  # a graph's first measurement: no folder yet


def test_an_attempt_measured_again_leaves_nothing_warm_for_the_next(monkeypatch, tmp_path):
    # The load guard discards a busy attempt: the next must compile as it did, or the kept measurement would read
    # warm with its graph's compilation thrown away with the discarded one.
    from ablate.config.design import ProtocolSettings
    from ablate.run import objective
    from ablate.trial import metrics as metric

    shared = tmp_path / "compile-cache" / "key"
    (shared / "fxgraph").mkdir(parents=True)
    (shared / "fxgraph" / "sibling").write_text("a sibling's graph")
    found: list[list[str]] = []

    limits: list[float | None] = []

    def attempt(spec: TrialSpec, **kwargs: object) -> dict:
        limits.append(spec.busy_limit)
        found.append(sorted(p.name for p in shared.rglob("*") if p.is_file()))
        (shared / "fxgraph" / f"compiled-{len(found)}").write_text("compiled")
        return {metric.FOREIGN_CORES: 1.0 if len(found) == 1 else 0.0}  # the first attempt ran beside other work

    real = objective.measured_quietly
    monkeypatch.setattr(objective, "run_in_fresh_process", attempt)
    monkeypatch.setattr(objective, "measured_quietly", lambda measure, limit, most, show, busy:
                        real(measure, limit, most, show, wait=lambda a, b: True))
    run = types.SimpleNamespace(planner=types.SimpleNamespace(protocol=ProtocolSettings(foreign_load_limit=0.25)),
                                shared_cpu=False, interpreters=None, show=lambda text: None, say=lambda text: None,
                                machine_busy=False)
    spec = TrialSpec(None, (), "cpu", train_for_accuracy=True)  # type: ignore[arg-type] - the fake reads no study
    got = objective.Objective._measure(run, spec, "here", compile_cache.Entries(shared))
    assert got[metric.REMEASURED] == 1.0
    assert limits == [0.25, 0.25]  # each attempt that may still be taken again is told the limit (`cut_short`)
    assert found == [["sibling"], ["sibling"]]  # the second attempt found only what the first found


@pytest.mark.slow
def test_a_sibling_loads_the_graph_the_first_one_compiled(tmp_path, mnist):
    # tiny.yaml on the small CNN, without the profiling window: the cache is read as the model compiles, and what it
    # holds is the same on any model (mnist_cnn's compiles took twice as long).
    study = studies.load(str(tiny_study(tmp_path / "study")), "cpu")
    shared = tmp_path / "compile-cache" / "key"
    cold = run_in_fresh_process(TrialSpec(study, (COMPILE,), "cpu", train_for_accuracy=False,
                                          compile_cache=str(shared)))
    assert cold["compile_cache_warm"] == 0.0 and cold["compile_cache_misses"] >= 1
    sibling = (Option("set_to_none"), COMPILE)
    warm = run_in_fresh_process(TrialSpec(study, sibling, "cpu", train_for_accuracy=False, compile_cache=str(shared)))
    assert warm["compile_cache_warm"] == 1.0 and warm["compile_cache_hits"] >= 1 and warm["compile_cache_misses"] == 0

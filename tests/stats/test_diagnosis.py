"""The diagnosis (`ablate.stats.diagnosis`): the phases, each technique's ceiling, and the phase that moved."""
from __future__ import annotations

import pytest

from ablate.stats import diagnosis
from ablate.trial import metrics as metric
from ablate.workload.parts import Parts


def _measured(step_s: float, shares: dict[str, float], samples_per_step: int = 64, idle: float | None = None) -> dict:
    m = {metric.PROFILED_STEP_S: step_s, metric.TRAIN_SAMPLES: 10.0 * samples_per_step, metric.TRAIN_STEPS: 10.0}
    m.update({metric.phase_s(p): step_s * shares.get(p, 0.0) for p in metric.STEP_PHASES})
    if idle is not None:
        m[metric.GPU_IDLE_SHARE] = idle
    return m


INPUT_BOUND = {"data": 0.52, "copy": 0.01, "forward": 0.17, "backward": 0.2, "optimizer": 0.08, "other": 0.02}


def test_a_profile_is_the_mean_of_the_profiled_measurements_and_none_without_one():
    found = diagnosis.profile([_measured(0.1, INPUT_BOUND), _measured(0.3, INPUT_BOUND), {metric.THROUGHPUT: 1.0}])
    assert found is not None and found.step_s == pytest.approx(0.2)
    assert found.share("data") == pytest.approx(0.52) and found.idle is None
    assert diagnosis.profile([{metric.THROUGHPUT: 1.0}]) is None


def test_the_ceiling_is_amdahls_on_the_phases_a_technique_targets():
    base = diagnosis.profile([_measured(0.1, INPUT_BOUND)])
    assert base is not None
    workers = diagnosis.predict(base, "num_workers", ["data"])
    assert workers.ceiling == pytest.approx(1 / 0.48) and not workers.unlikely
    pinning = diagnosis.predict(base, "pin_memory", ["copy"])
    assert pinning.ceiling == pytest.approx(1 / 0.99) and pinning.unlikely and "unlikely to help" in pinning.describe()
    compute = diagnosis.predict(base, "amp", ["compute"])
    assert compute.share == pytest.approx(0.37)
    assert diagnosis.predict(base, "activation_checkpointing", ["memory"]).ceiling is None


def test_launch_is_measured_only_where_the_gpu_idle_share_was():
    on_cpu = diagnosis.profile([_measured(0.1, INPUT_BOUND)])
    on_gpu = diagnosis.profile([_measured(0.1, INPUT_BOUND, idle=0.3)])
    assert on_cpu is not None and on_gpu is not None
    assert "launch" not in on_cpu.targets() and on_gpu.targets()["launch"] == pytest.approx(0.3)
    assert diagnosis.predict(on_cpu, "cuda_graphs", ["launch"]).ceiling is None
    assert diagnosis.predict(on_gpu, "cuda_graphs", ["launch"]).ceiling == pytest.approx(1 / 0.7)


def test_a_measured_speedup_confirms_or_refutes_the_prediction():
    base = diagnosis.profile([_measured(0.1, INPUT_BOUND)])
    assert base is not None
    pinning = diagnosis.predict(base, "pin_memory", ["copy"])  # unlikely: a ceiling of x1.01
    assert pinning.checked(0.98, 1.005) == "as predicted, within its ceiling"
    # Under x1.05 is what "as predicted" claims; above the ceiling itself, the interval is not "within" it.
    assert pinning.checked(0.98, 1.03) == "as predicted, under x1.05"
    assert pinning.checked(0.98, 1.08) == "not ruled out by the measurement"
    assert pinning.checked(1.2, 1.4).startswith("faster than its ceiling")


def test_within_its_ceiling_is_said_only_of_an_interval_wholly_at_or_under_it():
    base = diagnosis.profile([_measured(0.1, INPUT_BOUND)])
    assert base is not None
    workers = diagnosis.predict(base, "num_workers", ["data"])  # a ceiling of x2.08
    assert workers.checked(1.5, 1.9) == "within its ceiling"
    assert workers.checked(1.5, 1 / 0.48) == "within its ceiling"
    assert workers.checked(1.9, 2.3) == "consistent with its ceiling (the interval reaches above it)"
    assert workers.checked(2.1, 2.3) == "faster than its ceiling x2.08: it changed more than the phases it targets"


def test_the_sentence_names_the_phase_whose_time_per_sample_fell_most():
    base = diagnosis.profile([_measured(0.1, INPUT_BOUND)])
    workers = diagnosis.profile([_measured(0.05, {"data": 0.04, "copy": 0.02, "forward": 0.4, "backward": 0.4,
                                                  "optimizer": 0.12, "other": 0.02})])
    assert base is not None and workers is not None
    assert diagnosis.sentence("num_workers(n=2)", base, workers) == (
        "num_workers(n=2): waiting for data 52% -> 4% of the step")
    # A bigger batch: each step longer, each sample cheaper; read per sample, the optimizer's time fell most beyond
    # the rest (one step's optimizer for twice the samples), while data fell with the rest of the step.
    batch = diagnosis.profile([_measured(0.16, {"data": 0.6, "copy": 0.01, "forward": 0.17, "backward": 0.19,
                                                "optimizer": 0.01, "other": 0.02}, samples_per_step=128)])
    assert batch is not None and diagnosis.moved(base, batch) == "optimizer"
    # A process that ran faster throughout: every phase cheaper alike, and no phase named (the largest would be).
    faster = diagnosis.profile([_measured(0.07, INPUT_BOUND)])
    assert faster is not None and diagnosis.moved(base, faster) is None
    # The rest of the step ran slower (compute), a sleep-bound data phase did not: its share fell, its time did not.
    slower_compute = diagnosis.profile([_measured(0.12, {"data": 0.44, "copy": 0.01, "forward": 0.22, "backward": 0.22,
                                                         "optimizer": 0.09, "other": 0.02})])
    assert slower_compute is not None and diagnosis.moved(base, slower_compute) is None
    slower = diagnosis.profile([_measured(0.2, INPUT_BOUND)])
    assert slower is not None and diagnosis.sentence("x", base, slower) == (
        "x: no phase fell by more than 5% of the step beyond what the rest of it did")


def _data_fell_by(share_of_step: float) -> diagnosis.Profile:
    """The input-bound baseline with its data phase shortened by `share_of_step` of the baseline's step."""
    seconds = {p: 0.1 * s for p, s in INPUT_BOUND.items()}
    seconds["data"] -= 0.1 * share_of_step
    shares = {p: s / (0.1 * (1 - share_of_step)) for p, s in seconds.items()}
    found = diagnosis.profile([_measured(0.1 * (1 - share_of_step), shares)])
    assert found is not None
    return found


def test_a_phase_moved_only_where_it_fell_by_more_than_the_floor():
    base = diagnosis.profile([_measured(0.1, INPUT_BOUND)])
    assert base is not None and diagnosis.MOVED_FLOOR == 0.05
    # 3% of the step is within what profiling the same step twice moves: no phase named.
    assert diagnosis.moved(base, _data_fell_by(0.03)) is None
    assert diagnosis.sentence("x", base, _data_fell_by(0.03)) == (
        "x: no phase fell by more than 5% of the step beyond what the rest of it did")
    assert diagnosis.moved(base, _data_fell_by(0.08)) == "data"
    assert diagnosis.sentence("x", base, _data_fell_by(0.08)) == "x: waiting for data 52% -> 48% of the step"


def test_a_technique_that_needs_a_part_the_model_lacks_does_not_apply_and_says_why():
    cnn = Parts(attention=0, convolutions=2, float8_linears=1)
    assert diagnosis.does_not_apply(cnn, ["attention_backend"]) == "no attention layer for it to choose a kernel for"
    assert diagnosis.does_not_apply(cnn, ["channels_last"]) is None
    assert diagnosis.does_not_apply(cnn, ["float8"]) is None
    assert diagnosis.does_not_apply(cnn, ["amp"]) is None  # acts on any model's compute
    transformer = Parts(attention=6, convolutions=0, float8_linears=0)
    assert "2-d convolution" in diagnosis.does_not_apply(transformer, ["channels_last"])
    assert "divisible by 16" in diagnosis.does_not_apply(transformer, ["float8"])
    # A stack (a preset) does nothing only where none of its strategies can act: compile still can.
    assert diagnosis.does_not_apply(transformer, ["float8", "compile"]) is None
    assert diagnosis.does_not_apply(None, ["attention_backend"]) is None  # parts unknown: nothing claimed

    base = diagnosis.profile([_measured(0.1, INPUT_BOUND)])
    assert base is not None
    lacks = diagnosis.does_not_apply(cnn, ["attention_backend"])
    kernel = diagnosis.predict(base, "attention_backend", ["compute"], lacks)
    assert kernel.ceiling is not None and not kernel.unlikely and not kernel.can_help  # compute is 37%: moot
    assert kernel.describe() == ("attention_backend: does not apply to this model - no attention layer for it to "
                                 "choose a kernel for")
    assert diagnosis.predict(base, "amp", ["compute"]).can_help

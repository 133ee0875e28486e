"""Tasks beyond image classification: next-byte prediction on text, a user's own loss; the byte-level
transformer, text windows, and model FLOPs utilisation."""
from __future__ import annotations

import math
import urllib.request
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from ablate.config import study
from ablate.config.study import Budget, StudyError
from ablate.trial import mfu
from ablate.trial.loop import evaluate, train
from ablate.trial.measure import StepClock
from ablate.workload import data, tasks
from ablate.workload.models import ByteGPT
from strategies import compose

KJV = data.data_root() / "kjv" / "kjv.txt"


def _text(tmp_path: Path, payload: bytes) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_bytes(payload)
    return path


def test_text_windows_are_consecutive_bytes_with_targets_shifted_by_one_and_the_last_tenth_held_out(tmp_path):
    payload = bytes(range(256)) * 4  # 1,024 bytes: 921 for training, 103 held out
    splits = data.load("text", seq_len=10, path=str(_text(tmp_path, payload)))
    inputs, targets = splits.train[3]
    assert inputs.tolist() == list(payload[30:40]) and targets.tolist() == list(payload[31:41])
    assert inputs.dtype == torch.long
    assert len(splits.train) == (921 - 1) // 10 and len(splits.test) == (103 - 1) // 10
    first_held_out, _ = splits.test[0]
    assert first_held_out.tolist() == list(payload[921:931])  # the split is by position: after every training byte


def test_a_text_file_too_short_to_hold_out_a_window_is_one_clear_error(tmp_path):
    with pytest.raises(data.DataUnavailable, match="too short for one held-out window"):
        data.load("text", seq_len=64, path=str(_text(tmp_path, b"x" * 100)))


def test_the_kjv_corpus_offline_and_missing_says_where_it_looked_and_how_to_point_at_a_copy(tmp_path, monkeypatch):
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))

    def offline(*args, **kwargs):
        raise OSError("offline")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(data.DataUnavailable) as error:
        data.load("kjv", seq_len=32)
    message = str(error.value)
    assert str(tmp_path / "kjv" / "kjv.txt") in message and data.KJV_URL in message and "offline" in message
    assert data.DATA_ENV in message and not (tmp_path / "kjv" / "kjv.txt").exists()


def test_next_token_loss_is_cross_entropy_over_every_position_and_throughput_counts_tokens():
    task = tasks.build("next_token", {"seq_len": 8})
    model = ByteGPT(seq_len=8, n_layer=1, n_head=2, d_model=16)
    inputs, targets = torch.randint(0, 256, (2, 4, 8)).unbind(0)
    logits = model(inputs)
    assert logits.shape == (4, 8, 256)
    expected = F.cross_entropy(logits.reshape(32, 256), targets.reshape(32))
    assert torch.allclose(task.loss(model, (inputs, targets)), expected)
    assert task.samples((inputs, targets)) == 4 and task.units_per_sample == 8 and task.unit == "tokens"


def test_next_token_quality_is_accuracy_over_every_position_and_bits_per_byte():
    class Echo(torch.nn.Module):  # predicts each input byte as the next one, with certainty
        def forward(self, tokens):
            return F.one_hot(tokens, 256).float() * 50

    inputs = torch.tensor([[1, 2, 3, 4], [5, 5, 5, 5]])
    targets = torch.tensor([[2, 3, 4, 4], [5, 5, 5, 6]])  # right at 1 + 3 of 8 positions
    quality = tasks.build("next_token", {"seq_len": 4}).evaluate(Echo(), [(inputs, targets)], torch.device("cpu"))
    assert quality.accuracy == pytest.approx(100 * 4 / 8)
    assert dict(quality.extra)["bits_per_byte"] == pytest.approx(quality.loss / math.log(2))


def test_byte_gpt_is_causal_and_its_blocks_are_one_repeated_module_list():
    model = ByteGPT(seq_len=16, n_layer=3, n_head=2, d_model=32).eval()
    tokens = torch.randint(0, 256, (1, 16))
    changed = tokens.clone()
    changed[0, 10] = (changed[0, 10] + 1) % 256
    a, b = model(tokens), model(changed)
    assert torch.equal(a[0, :10], b[0, :10]) and not torch.allclose(a[0, 10:], b[0, 10:])
    assert len(model.blocks) == 3 and len({type(b) for b in model.blocks}) == 1
    assert model.head.weight is model.embed.weight


def test_byte_gpt_default_is_the_10m_parameter_gpu_configuration_and_counts_its_flops():
    with torch.device("meta"):
        model = ByteGPT()
    weights = sum(p.numel() for p in model.parameters())
    assert 9e6 < weights < 12e6
    matmul_weights = weights - 256 * 384  # the position embedding is a lookup
    assert model.flops_per_token() == 6 * matmul_weights + 12 * 6 * 384 * 256


def test_a_users_own_loss_trains_and_its_quality_is_the_mean_held_out_loss_weighted_by_batch_size():
    from custom_tasks import nll

    task = tasks.build("custom_tasks:nll")
    assert not task.has_accuracy and task.unit == "samples"
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    g = torch.Generator().manual_seed(0)
    inputs, labels = torch.randn(10, 2, 2, generator=g), torch.randint(0, 3, (10,), generator=g)
    loader = DataLoader(TensorDataset(inputs, labels), batch_size=4)  # 4 + 4 + 2
    quality = evaluate(task, model, loader, torch.device("cpu"))
    assert quality.accuracy is None
    assert quality.loss == pytest.approx(nll(model, (inputs, labels)).item(), rel=1e-6)
    before = [p.clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = StepClock(Budget(train_samples=8, warmup_samples=4, window_samples=4, windows=1), torch.device("cpu"),
                      False)
    train(compose(), task, model, optimizer, loader, torch.device("cpu"), clock)
    assert clock.samples >= 8 and any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("name, error", [
    ("custom_tasks:NOT_A_FUNCTION", "is not a function"),
    ("custom_tasks:missing", "cannot be imported"),
    ("next_tokens", "unknown task"),
])
def test_a_task_that_cannot_be_built_says_why(name, error):
    with pytest.raises(LookupError, match=error):
        tasks.build(name)


def _study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text("model: byte_gpt\ndataset: kjv\nspace: {amp: [off, amp]}\n" + text)
    return path


@pytest.mark.parametrize("text, error", [
    ("task: classification\n", "does not fit dataset 'kjv'"),
    ("task: {next_token: {seq_len: 0}}\n", "seq_len must be a whole number >= 1"),
    ("task: {next_token: {context: 8}}\n", "unknown option 'context'"),
    ("task: next_token\nmodel_options: {seq_len: 64}\n", "set it once, as task"),
    ("task: next_token\nmodel_options: {layers: 2}\n", "unknown option 'layers'"),
    ("task: next_token\nmodel_options: {d_model: 30, n_head: 4}\n", "must be a multiple of n_head"),
    ("task: next_token\nbudget: {target_accuracy: 50, target_loss: 1.5}\n", "one of target_accuracy and target_loss"),
    ("task: next_token\ndataset_options: {path: x.txt}\n", "dataset 'kjv' takes no options"),
])
def test_a_transformer_study_that_does_not_fit_together_is_one_line_naming_the_problem(tmp_path, text, error):
    with pytest.raises(StudyError, match=error) as raised:
        study.load(str(_study(tmp_path, text)), "cpu")
    assert "\n" not in str(raised.value)


def test_a_loss_function_task_cannot_have_an_accuracy_target(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("model: mnist_cnn\ndataset: mnist\ntask: custom_tasks:nll\nspace: {amp: [off, amp]}\n"
                    "budget: {target_accuracy: 90}\n")
    with pytest.raises(StudyError, match="has no accuracy .* set target_loss"):
        study.load(str(path), "cpu")


def test_the_model_gets_the_tasks_sequence_length_and_the_study_its_options(tmp_path):
    loaded = study.load(str(_study(tmp_path, "task: {next_token: {seq_len: 64}}\nmodel_options: {n_layer: 2}\n")),
                        "cpu")
    assert study.model_kwargs(loaded) == {"n_layer": 2, "seq_len": 64}
    assert loaded.dataset_kwargs == {"seq_len": 64} and loaded.throughput_unit == "tokens"


@pytest.mark.parametrize("name, tflops", [
    ("NVIDIA H100 80GB HBM3", 989.5), ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 NVL", 835.5),
    ("NVIDIA H200", 989.5), ("NVIDIA A100-SXM4-80GB", 312.0),
])
def test_mfu_uses_the_named_devices_dense_bf16_peak(name, tflops):
    assert mfu.peak(name).tflops == tflops and "datasheet" in mfu.peak(name).source
    assert mfu.utilisation(1e6, 1e8, name) == pytest.approx(1e14 / (tflops * 1e12))


def test_mfu_is_not_claimed_for_a_device_without_a_known_peak():
    assert mfu.utilisation(1e6, 1e8, "Intel(R) Xeon(R) Processor (2 cores)") is None
    assert mfu.peak("Tesla T4") is None


@pytest.mark.skipif(not KJV.is_file(), reason=f"the KJV corpus is not at {KJV} (set ABLATE_DATA_DIR)")
def test_the_kjv_corpus_loads_from_the_data_root():
    splits = data.load("kjv", seq_len=256)
    assert len(splits.train) == (int(4_404_412 * 0.9) - 1) // 256
    text = bytes(splits.train[0][0].tolist()).decode("ascii")
    assert "In the beginning" in text


def test_the_report_of_a_language_model_on_a_known_gpu_gives_mfu_with_its_peak_and_memory_saved(tmp_path):
    from ablate.config.choices import BASELINE
    from ablate.render import report
    from ablate.stats.answer.comparison import compare
    from ablate.stats.answer.findings import analyse_all
    from ablate.store.records import Record, combine

    path = tmp_path / "s.yaml"
    path.write_text("model: byte_gpt\ndataset: kjv\ntask: next_token\nspace: {amp: [off, {amp: {dtype: bf16}}]}\n")
    loaded = study.load(str(path), "cuda")
    h100 = {"device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3", "torch": "2.11", "commit": "c", "host": "h"}

    def measured(number: int, combination: str, rate: float, block: int, memory: float) -> Record:
        levels = {"amp": "off" if combination == BASELINE else combination}
        return Record(number, combination, levels, "complete", block=block, machine=h100, accuracy_trained=block == 0,
                      metrics={"throughput": rate, "throughput_window_0": rate, "mfu": rate * 7e7 / 989.5e12,
                               "peak_memory_mb": memory, "test_accuracy": 40.0, "train_samples": 640.0,
                               "train_steps": 10.0})

    records = combine([measured(2 * b, BASELINE, 1e6 * (1 + b / 100), b, 1000.0) for b in range(3)]
                      + [measured(2 * b + 1, "amp(dtype=bf16)", 2e6 * (1 + b / 50), b, 600.0) for b in range(3)])
    found = analyse_all(loaded, compare(records, loaded.accuracy_tolerance))
    (built,) = report.build(loaded, found, "grid", tmp_path / "report")
    text = built.markdown.read_text()
    assert "| tokens/s |" in text and "| MFU |" in text and "989.5 TFLOPS" in text and "H100 SXM" in text
    row = next(line for line in text.splitlines() if line.startswith("| amp(dtype=bf16) |"))
    assert "600 (-40%)" in row and f"| {100 * 2e6 * 7e7 / 989.5e12:.1f}% |" in row  # the MFU of the trained one
    assert "timed windows" in text  # CUDA memory: the windows' tensors only

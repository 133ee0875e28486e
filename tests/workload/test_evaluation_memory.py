"""Evaluation within memory: held-out batches are cut into forwards whose logits fit a budget, and the loss
and accuracy are running sums, so evaluation's peak memory does not grow with the test set (a library model's
50,257-word logits over a whole test batch once drove a 24 GiB machine out of memory)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from ablate.trial import evaluate  # the documented path (docs/api.md)
from ablate.workload import tasks

VOCAB, SEQ, BUDGET = 8_000, 32, 4 * 2**20  # a row's logits: 32 x 8,000 fp32 = 1 MB; 4 rows a forward
ROW_BYTES = SEQ * VOCAB * 4
# One process evaluates a test set of N windows, then of 4N, each as one loader batch (a test_batch_size of
# 1,000 is the whole test set of most studies), and prints its peak resident memory after each.
PEAKS = f"""
import resource, torch
from torch.utils.data import DataLoader, TensorDataset
from ablate.trial import evaluate  # the documented path (docs/api.md)
from ablate.workload import tasks

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding({VOCAB}, 8), torch.nn.Linear(8, {VOCAB}))
task = tasks.build("next_token", {{"seq_len": {SEQ}}})
peaks = []
for n in (64, 256):
    windows = torch.randint({VOCAB}, (n, {SEQ}))
    test = DataLoader(TensorDataset(windows, windows.roll(-1, 1)), batch_size=n)
    evaluate(task, model, test, torch.device("cpu"), logits_budget={BUDGET})
    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)  # Linux: KiB
print(*peaks)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux (bytes on macOS)")
def test_evaluation_peak_memory_stays_flat_as_the_test_set_grows_fourfold():
    done = subprocess.run([sys.executable, "-c", PEAKS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    small, large = map(int, done.stdout.split())
    extra_logits = (256 - 64) * ROW_BYTES  # what the 192 extra windows' logits take at once: 197 MB
    # Logits of a whole batch (and cross-entropy's log-softmax beside them) grew the peak by about twice that.
    assert large - small < extra_logits / 8, f"peak grew by {(large - small) / 2**20:.0f} MiB"


def test_a_forward_takes_as_many_rows_as_the_logits_budget_holds_and_at_least_one():
    gpt2_window = 63 * 50_257 * 4  # GPT-2 over 64 tokens: 63 predictions of a 50,257-word vocabulary, fp32
    rows = tasks.eval_rows(gpt2_window)
    assert rows * gpt2_window <= tasks.EVAL_LOGITS_BYTES < (rows + 1) * gpt2_window and 10 <= rows <= 40
    assert tasks.eval_rows(10 * 4) >= 1_000_000  # ten classes: a whole loader batch in one forward
    assert tasks.eval_rows(2 * tasks.EVAL_LOGITS_BYTES) == 1  # a row beyond the budget still gets its forward


def test_a_cpu_evaluates_one_gpt2_window_a_forward_below_glibcs_mmap_threshold():
    gpt2_window = 63 * 50_257 * 4
    cpu = tasks.eval_budget(torch.device("cpu"))
    # Above 32 MiB (glibc's largest dynamic mmap threshold) each forward's logits would be mapped afresh.
    assert gpt2_window < cpu <= 32 * 2**20 and tasks.eval_rows(gpt2_window, cpu) == 1
    assert tasks.eval_budget(torch.device("cuda", 0)) == tasks.EVAL_LOGITS_BYTES  # its allocator keeps blocks


def test_evaluation_without_a_budget_takes_the_devices():
    model, task = _Counted(), tasks.build("next_token", {"seq_len": 6})
    windows = torch.randint(50, (20_000, 6))  # 24 MB of logits: over the CPU's budget, under an accelerator's
    evaluate(task, model, DataLoader(TensorDataset(windows, windows.roll(-1, 1)), batch_size=20_000),
             torch.device("cpu"))
    rows = tasks.eval_rows(6 * 50 * 4, tasks.eval_budget(torch.device("cpu")))
    assert model.rows == [1, rows, 20_000 - 1 - rows]


class _Counted(torch.nn.Module):
    """A linear next-token model that records how many rows each forward took."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(50, 4), torch.nn.Linear(4, 50)
        self.rows: list[int] = []

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self.rows.append(len(tokens))
        return self.head(self.embed(tokens))


def test_cut_evaluation_gives_the_figures_of_whole_batches_with_each_forward_within_the_budget():
    torch.manual_seed(0)
    model, task = _Counted(), tasks.build("next_token", {"seq_len": 6})
    windows = torch.randint(50, (23, 6))
    test = DataLoader(TensorDataset(windows, windows.roll(-1, 1)), batch_size=10)  # 10 + 10 + 3
    row = 6 * 50 * 4
    cut = evaluate(task, model, test, torch.device("cpu"), logits_budget=3 * row)
    assert model.rows == [1, 3, 3, 3, 3, 3, 3, 1, 3]  # a first row measures; then 3 a forward, within each batch
    model.rows.clear()
    whole = evaluate(task, model, test, torch.device("cpu"), logits_budget=100 * row)
    assert model.rows == [1, 9, 10, 3]
    logits = model.head(model.embed(windows)).flatten(0, 1)
    targets = windows.roll(-1, 1).flatten()
    by_hand = torch.nn.functional.cross_entropy(logits, targets).item()
    accuracy = 100 * (logits.argmax(-1) == targets).float().mean().item()
    for quality in (cut, whole):
        assert quality.loss == pytest.approx(by_hand, rel=1e-5) and quality.accuracy == pytest.approx(accuracy)
    assert model.training  # evaluation leaves the model in training mode


def test_classification_evaluation_is_cut_the_same_way():
    torch.manual_seed(1)
    model = torch.nn.Linear(5, 7)
    inputs, labels = torch.randn(40, 5), torch.randint(7, (40,))
    test = DataLoader(TensorDataset(inputs, labels), batch_size=40)
    quality = evaluate(tasks.build("classification"), model, test, torch.device("cpu"), logits_budget=7 * 4 * 6)
    logits = model(inputs)
    assert quality.loss == pytest.approx(torch.nn.functional.cross_entropy(logits, labels).item(), rel=1e-5)
    assert quality.accuracy == pytest.approx(100 * (logits.argmax(-1) == labels).float().mean().item())

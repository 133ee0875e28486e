"""What a study trains its model to do: the loss of a batch, and the quality figure on held-out data.

The training loop only calls ``task.loss(model, batch)``, so any model can be
ablated: an image classifier (``classification``), a language model
(``next_token``), a Hugging Face causal LM on its own loss (``causal_lm``), or anything else through the
user's own loss function named by import path (``task: mypackage.losses:my_loss``, called with the model and
the batch, after the batch has been moved to the device).

Quality: classification and next-token prediction are judged on held-out
accuracy (percent; accuracy parity and ``target_accuracy`` use it) and mean
loss; next-token prediction adds bits per byte (its loss in bits: the corpus
is bytes). A user's own loss has no accuracy: its quality is its mean held-out
loss (``target_loss``), and accuracy parity cannot be judged.

Evaluation runs within memory: held-out batches are split into forwards whose logits fit a budget
(`eval_rows`), and the figures are running sums over them, so the memory evaluation takes does not grow
with the test set or with a library model's vocabulary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F

from ablate.workload.registry import lookup

DEFAULT_SEQ_LEN = 256
EVAL_LOGITS_BYTES = 256 * 2**20  # the logits of one evaluation forward, in fp32, on an accelerator: `eval_rows`
CPU_EVAL_LOGITS_BYTES = 16 * 2**20  # on a CPU: under glibc's largest mmap threshold (`eval_budget`)


def eval_budget(device: torch.device) -> int:
    """The bytes one evaluation forward's logits may take on `device`.

    On a CPU, under glibc malloc's mmap threshold, which adapts up to 32 MiB on 64-bit Linux: a larger block is mapped
    afresh at each allocation and unmapped at its free, so every forward pays the kernel's zeroing of its pages for
    the logits and each temporary their size, where below it the heap hands the same blocks back. GPT-2's head
    evaluated about twice as fast on a CPU at 16 MiB as at 256 MiB: most of the gap is the mapping, the rest the
    passes over logits that no longer fit the cache (docs/measuring.md, "Evaluation sized to the decision"). An
    accelerator's allocator keeps its blocks, and its kernels want rows, so it keeps `EVAL_LOGITS_BYTES`.
    """
    return CPU_EVAL_LOGITS_BYTES if device.type == "cpu" else EVAL_LOGITS_BYTES


def eval_rows(bytes_per_row: int, budget: int = EVAL_LOGITS_BYTES) -> int:
    """How many rows (samples) one evaluation forward takes so that their logits fit in `budget` bytes; >= 1.

    Why a budget, and not the study's ``test_batch_size`` alone: one forward's logits are rows x positions x classes
    numbers, and a library language model's vocabulary makes that the largest thing evaluation holds. GPT-2's 50,257
    words over 1,000 windows of 64 tokens are 12.7 GB of fp32 logits, and cross-entropy's log-softmax is as large
    again: enough to exhaust a 24 GiB machine's memory (benchmarks/RESULTS.md, "A library model's evaluation within
    memory"). At 256 MiB, the logits and the one or two temporaries of their size (the log-softmax; a causal LM's
    shifted copy) stay under 1 GiB beside the model on any machine that can train it, while a small head still
    evaluates a whole loader batch in one forward (ten classes are 40 bytes a row: 6.7 million rows fit), so only
    large vocabularies are split, and GPT-2 at 64 tokens still takes about 20 windows a forward (one on a CPU, whose
    budget is smaller: `eval_budget`).
    """
    return max(1, budget // max(1, bytes_per_row))


def _rows(batch: Any, start: int, stop: int) -> Any:
    """Rows `start:stop` of every tensor of a batch (a tensor, a tuple or list of them, or a dict)."""
    if isinstance(batch, torch.Tensor):
        return batch[start:stop]
    if isinstance(batch, (tuple, list)):
        return type(batch)(_rows(b, start, stop) for b in batch)
    if isinstance(batch, dict):
        return {k: _rows(v, start, stop) for k, v in batch.items()}
    return batch


@dataclass(frozen=True)
class Quality:
    """Held-out quality: loss always, accuracy (percent) where the task defines one, and extra figures."""

    loss: float
    accuracy: float | None = None
    extra: tuple[tuple[str, float], ...] = ()


class Task:
    """Base: a batch is ``(inputs, targets)``; one sample is one row of ``inputs``."""

    name: str = "task"
    unit: str = "samples"  # what throughput counts: samples/s, or tokens/s for a language model
    has_accuracy: bool = True

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        raise NotImplementedError

    def samples(self, batch: Any) -> int:
        """Samples in a batch: the length of its first tensor."""
        first = batch[0] if isinstance(batch, (tuple, list)) else next(iter(batch.values())) \
            if isinstance(batch, dict) else batch
        return len(first)

    @property
    def units_per_sample(self) -> int:
        return 1

    @property
    def predictions_per_sample(self) -> int:
        """Predictions one held-out sample is scored on (`ablate.workload.evaluation` sizes the test subsample)."""
        return 1

    def evaluate(self, model: torch.nn.Module, batches: Iterable[Any], device: torch.device,
                 logits_budget: int = EVAL_LOGITS_BYTES) -> Quality:
        """Held-out quality over `batches`, each forward's logits within `logits_budget` bytes (`eval_rows`)."""
        raise NotImplementedError


def _move(batch: Any, device: torch.device) -> Any:
    from strategies.base import move

    return move(batch, device)


class _Counting(Task):
    """Tasks scored by cross-entropy over predictions, counting correct argmaxes."""

    def _logits_and_targets(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return F.cross_entropy(*self._logits_and_targets(model, batch))

    def evaluate(self, model: torch.nn.Module, batches: Iterable[Any], device: torch.device,
                 logits_budget: int = EVAL_LOGITS_BYTES) -> Quality:
        """Accuracy and mean loss over every prediction, in fp32 without autocast, within memory.

        Each held-out batch is cut into forwards whose logits fit `logits_budget` bytes (`eval_rows`; the
        first forward, of one row, measures a row's logits), and only running sums are kept: the correct
        predictions, the summed loss (fp64, on the device, read once at the end) and the count.
        """
        correct = loss_sum = None
        count, rows = 0, 1  # one row first: what a row's logits take is known after its forward
        for batch in batches:
            n, start = self.samples(batch), 0
            while start < n:
                part = _move(_rows(batch, start, start + rows), device)
                logits, targets = self._logits_and_targets(model, part)
                loss = F.cross_entropy(logits, targets, reduction="sum").double()
                right = (logits.argmax(-1) == targets).sum()
                loss_sum = loss if loss_sum is None else loss_sum + loss
                correct = right if correct is None else correct + right
                count += targets.numel()
                taken = min(rows, n - start)
                start += taken
                rows = eval_rows(-(-logits.numel() * max(logits.element_size(), 4) // taken), logits_budget)
                del logits, targets, part
        if loss_sum is None or correct is None or not count:
            raise ValueError(f"{self.name}: the held-out set has no prediction to evaluate")
        return self._quality(loss_sum.item() / count, 100.0 * int(correct.item()) / count)

    def _quality(self, loss: float, accuracy: float) -> Quality:
        return Quality(loss, accuracy)


class Classification(_Counting):
    """``cross_entropy(model(inputs), targets)``: one label per sample."""

    name = "classification"

    def _logits_and_targets(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = batch
        return model(inputs), targets


class NextToken(_Counting):
    """Next-token prediction: ``inputs`` and ``targets`` are (batch, seq_len) token ids, targets shifted by one.

    Throughput is in tokens (every position of every sequence is a prediction trained on).
    """

    name = "next_token"
    unit = "tokens"

    def __init__(self, seq_len: int = DEFAULT_SEQ_LEN) -> None:
        if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
            raise ValueError(f"next_token: seq_len must be a whole number >= 1, got {seq_len!r}")
        self.seq_len = seq_len

    @property
    def units_per_sample(self) -> int:
        return self.seq_len

    @property
    def predictions_per_sample(self) -> int:
        return self.seq_len

    def _logits_and_targets(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = batch
        logits = model(inputs)
        return logits.flatten(0, -2), targets.flatten()

    def _quality(self, loss: float, accuracy: float) -> Quality:
        return Quality(loss, accuracy, (("bits_per_byte", loss / math.log(2)),))


class CausalLM(NextToken):
    """A Hugging Face causal LM trained on its own loss: ``model(input_ids=inputs, labels=inputs).loss``.

    The batch is the text datasets' ``(inputs, targets)``; the model shifts the labels itself (position t
    predicts token t+1), so each sequence of ``seq_len`` tokens trains ``seq_len - 1`` predictions and the
    targets' last token goes unused. Throughput counts the ``seq_len`` tokens fed in. Quality: next-token
    accuracy and mean loss over the same shifted positions, and bits per token (bits per byte when the text
    is bytes, as without a tokenizer).
    """

    name = "causal_lm"

    @property
    def predictions_per_sample(self) -> int:
        return max(1, self.seq_len - 1)  # the model shifts its labels: the last position predicts nothing

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        inputs, _ = batch
        return model(input_ids=inputs, labels=inputs).loss  # the model's own loss, as its users train it

    def _logits_and_targets(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, _ = batch
        logits = model(input_ids=inputs).logits[:, :-1]
        return logits.flatten(0, -2).float(), inputs[:, 1:].flatten()

    def _quality(self, loss: float, accuracy: float) -> Quality:
        return Quality(loss, accuracy, (("bits_per_token", loss / math.log(2)),))


class CustomLoss(Task):
    """The user's ``fn(model, batch) -> scalar loss``; quality is its mean over the held-out batches."""

    has_accuracy = False

    def __init__(self, path: str, fn: Callable[[torch.nn.Module, Any], torch.Tensor]) -> None:
        self.name, self.fn = path, fn

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return self.fn(model, batch)

    def evaluate(self, model: torch.nn.Module, batches: Iterable[Any], device: torch.device,
                 logits_budget: int = EVAL_LOGITS_BYTES) -> Quality:
        """The loss's mean over the held-out batches as the loader gives them (a loss function's batch cannot be
        cut: it may not be rows of tensors), kept as a running sum."""
        total, count = 0.0, 0
        for batch in batches:
            batch = _move(batch, device)
            n = self.samples(batch)
            total += self.fn(model, batch).item() * n  # weighted: a short last batch counts for its size
            count += n
        return Quality(total / count)


TASKS: dict[str, type[Task]] = {"classification": Classification, "next_token": NextToken, "causal_lm": CausalLM}
TEXT_TASKS = frozenset({"next_token", "causal_lm"})  # trained on the text datasets' windows of tokens


def build(name: str, options: dict[str, Any] | None = None) -> Task:
    """The task a study names: a built-in with its options, or ``package.module:function`` (a loss)."""
    options = options or {}
    if name in TASKS:
        return TASKS[name](**options)
    fn = lookup(TASKS, name, "task")  # raises LookupError naming the built-ins
    if options:
        raise ValueError(f"task {name!r}: a loss function takes no options, got {', '.join(options)}")
    if not callable(fn):
        raise LookupError(f"task {name!r} is not a function (expected fn(model, batch) -> loss)")
    return CustomLoss(name, fn)

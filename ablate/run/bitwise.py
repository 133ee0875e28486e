"""Which accuracy groups train bitwise as a simpler one on this machine: those share its accuracy, trained once.

Why: accuracy is trained once per accuracy group and training seed
(`ablate.stats.parity`), and on a CPU those trainings are most of a study's
cost. Some strategies that may change the numbers do not, on a given machine
and model: TorchScript on a CPU runs eager's own kernels (it fuses nothing
there) and can train bitwise as eager does, yet each of its groups would be
trained apart (docs/evidence.md, "Evidence: accuracy groups trained once").

The check, once per study and device, before the first measurement: for each
accuracy group holding a strategy that `may_be_bitwise_equal`, its *core* is
the same group without those strategies (`torchscript + amp(dtype=bf16)`:
`amp(dtype=bf16)`). In a fresh trial interpreter (`probe`) the core trains
`STEPS` steps through the study's own loop, data, model and seed; then the core
again, a control (a machine whose kernels are not deterministic cannot show
equality, and its groups stay apart); then the group. Where every weight,
buffer and loss of the group equals the core's bitwise, the group trains as
its core: its combinations borrow the core's accuracy at every seed, and its
parity verdict is the core's. Anything else (a difference, a failed check, a
control that differs) leaves the group apart, which costs time, never
correctness.

What it rests on: the same kernels on the same inputs give the same bits, and a
training is a fixed sequence of kernels. Equality over every element of every
step shows both stacks run the same computation on this model, these shapes
and this machine; a different kernel or formula agreeing bitwise on all of it
would be a coincidence. The shapes stay the same for the whole training (full
batches only), and evaluation runs through the unwrapped model, which holds
the same weights. It is evidence, not proof: a kernel that picks its path by
the values, not the shapes, could part later. The report says which groups
merged, and on what.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Sequence

from ablate.config.choices import Option
from ablate.config.design import ProtocolSettings
from ablate.config.study import Study
from ablate.trial.interpreters import Interpreters
from ablate.trial.process import TrialFailed, TrialSpec, run_in_fresh_process, set_up

STEPS = 8  # past TorchScript's profiling runs (its optimised graph runs from the second call on)


@dataclass(frozen=True)
class BitwiseCheck:
    """One accuracy group's answer: the group it trains as (itself unless bitwise equal), and why."""

    group: str
    trains_as: str
    why: str


Candidate = tuple[tuple[Option, ...], tuple[Option, ...], str]  # a group's numbers' options, its core's, its core


def candidates(combinations: Iterable[Sequence[Option]],
               group_of: Callable[[Sequence[Option]], str]) -> dict[str, Candidate]:
    """Each accuracy group among `combinations` (the runnable ones) with a strategy that may be bitwise equal."""
    found: dict[str, Candidate] = {}
    for options in combinations:
        numeric = tuple(o for o in options if o.changes_numerics)
        core = tuple(o for o in numeric if not o.may_be_bitwise_equal)
        if core != numeric:
            found.setdefault(group_of(numeric), (numeric, core, group_of(core)))
    return found


def cannot_pay(study: Study, protocol: ProtocolSettings) -> str | None:
    """Why no probe is worth its trainings in this study, or None. A throughput-only study, or data without
    accuracy (synthetic, or a stand-in for files that are missing), trains no accuracy at all: there is nothing for a
    group to share. A single pass at one seed trains each group's accuracy once, alongside its one measurement: a
    probe (three short trainings in an interpreter of its own) costs about what it could save."""
    if study.budget.throughput_only:
        return "the study measures throughput only (budget.throughput_only)"
    if protocol.full_blocks is None and not protocol.racing and protocol.seeds == 1:
        return "a single pass at one seed trains each group once, about what a check would cost"
    return _no_accuracy(study)


def _no_accuracy(study: Study) -> str | None:
    """The dataset's own note when it has no accuracy (as a trial would load it), else None; a dataset that cannot
    be loaded here says nothing (its trials will say why). From `ablate run`'s early load of it: the study's process
    stays light, its trials load the data in their own interpreters."""
    from ablate.workload import data

    try:
        return data.throughput_only(study.dataset, **study.dataset_kwargs)
    except Exception:  # unreadable data fails the trials, with their own message
        return None


def check(todo: dict[str, Candidate], study: Study, device: str, interpreters: Interpreters,
          show: Callable[[str], None]) -> list[BitwiseCheck]:
    """Every candidate group's answer on this machine, each checked in a fresh trial interpreter."""
    checks = []
    for n, (group, (numeric, core, core_group)) in enumerate(sorted(todo.items()), 1):
        show(f"checking which accuracy groups train bitwise alike ({n}/{len(todo)}): {group}")
        spec = TrialSpec(study, numeric, device, train_for_accuracy=False)
        try:
            # A partial of a module-level function: it travels to the interpreter by pickle.
            found = run_in_fresh_process(spec, functools.partial(probe, core=core), interpreters=interpreters)
        except TrialFailed as error:
            checks.append(BitwiseCheck(group, group, f"not checked: {error}"))
            continue
        checks.append(answer(group, core_group, found))
    return checks


def answer(group: str, core: str, found: dict[str, Any]) -> BitwiseCheck:
    """The check's verdict from `probe`'s findings."""
    if not found["control_equal"]:
        return BitwiseCheck(group, group, f"not told: {core} itself did not train bitwise alike twice here")
    if found["equal"]:
        return BitwiseCheck(group, core, f"bitwise equal to {core} after {found['steps']:g} training steps")
    return BitwiseCheck(group, group, f"differs from {core} (largest weight difference "
                                      f"{found['largest_difference']:.3g} after {found['steps']:g} steps)")


def probe(spec: TrialSpec, core: Sequence[Option]) -> dict[str, Any]:
    """In a trial interpreter: train the core twice and `spec`'s options once, `STEPS` steps each from the same
    seed, and say whether the control and the group equal the core bitwise."""
    reference, reference_losses = _trained(replace(spec, options=tuple(core)))
    control, control_losses = _trained(replace(spec, options=tuple(core)))
    mine, losses = _trained(spec)
    found = {"steps": float(STEPS), "control_equal": _equal(reference, control, reference_losses, control_losses),
             "equal": _equal(reference, mine, reference_losses, losses)}
    found["largest_difference"] = max(((a.double() - b.double()).abs().max().item() for a, b in
                                       zip(reference.values(), mine.values()) if a.is_floating_point() and a.numel()),
                                      default=0.0) if reference.keys() == mine.keys() else float("inf")
    return found


def _equal(a: dict[str, Any], b: dict[str, Any], a_losses: list[Any], b_losses: list[Any]) -> float:
    import torch

    same = (a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
            and len(a_losses) == len(b_losses) and all(torch.equal(x, y) for x, y in zip(a_losses, b_losses)))
    return float(same)


def _trained(spec: TrialSpec) -> tuple[dict[str, Any], list[Any]]:
    """The weights and buffers after `STEPS` steps of the study's own loop, and each step's loss."""
    from ablate.trial.loop import train

    built = set_up(spec)
    prepared = built.stack.prepare_model(built.model)
    optimizer = built.stack.prepare_optimizer(built.optimizer)
    steps = _Steps(STEPS)
    train(built.stack, built.task, prepared, optimizer, built.loader, built.device, steps,
          spec.study.baseline.max_grad_norm)
    # The unwrapped model: a scripted wrapper shares its weights, and evaluation reads them from it.
    return {k: v.detach().cpu().clone() for k, v in built.model.state_dict().items()}, steps.losses


class _Steps:
    """A clock for `ablate.trial.loop.train` that stops after `n` steps and keeps every step's loss."""

    profiling = False  # it times nothing

    def __init__(self, n: int) -> None:
        self.n = n
        self.losses: list[Any] = []  # each step's loss tensor, as `_trained` returns them

    def batches(self, loader: Iterable[Any]) -> Iterator[Any]:
        return itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), self.n)

    def count(self, n: int, loss: Any = None) -> None:
        if loss is not None:
            self.losses.append(loss.detach().float().cpu().clone())

    def mark(self, phase: int) -> None:
        pass

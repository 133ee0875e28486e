"""Training speed-up techniques as composable objects that work in any PyTorch loop.

    from strategies import AMP, Compile, compose
    stack = compose(AMP("bf16"), Compile())

Each technique is one `Strategy` in its own module; `compose` stacks them and
the stack's hooks drive the loop (see README). Depends on torch only.
"""
from strategies.amp import AMP
from strategies.base import Strategy
from strategies.batch_size import BatchSize
from strategies.compile import Compile
from strategies.num_workers import NumWorkers
from strategies.pin_memory import PinMemory
from strategies.set_to_none import SetToNone
from strategies.stack import ConflictError, Stack, compose
from strategies.torchscript import TorchScript

REGISTRY: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (NumWorkers, PinMemory, BatchSize, SetToNone, AMP, TorchScript, Compile)
}

__all__ = [
    "AMP", "BatchSize", "Compile", "ConflictError", "NumWorkers", "PinMemory", "REGISTRY",
    "SetToNone", "Stack", "Strategy", "TorchScript", "compose",
]

"""Why a trial failed, as one line that starts with a one-word kind.

The kind is what a user filters on (Optuna user attribute and MLflow tag
``ablate.reason``); the rest says what happened. Kinds:

    diverged     the loss became NaN or infinite
    oom          out of device or host memory
    compile      scripting or compilation failed, or CUDA graphs were skipped (never timed as if compiled)
    worker       a DataLoader worker died or stopped delivering batches
    timeout      the trial ran past the study's per-trial time limit
    killed       the trial process was killed by a signal
    crashed      the trial process exited without a result
    interrupted  the study was stopped (Ctrl-C, SIGTERM, a kill) during the trial
    error        any other exception, with its type and message
"""
from __future__ import annotations

KINDS = ("diverged", "oom", "compile", "worker", "timeout", "killed", "crashed", "interrupted", "error")
INTERRUPTED = "interrupted: the study was stopped before this trial finished"


class Diverged(ArithmeticError):
    """The training loss became NaN or infinite."""


class CompileFailed(RuntimeError):
    """A strategy's scripting or compilation failed."""


def describe(error: BaseException) -> str:
    """``"<kind>: <ExceptionType>: <first line of the message>"``."""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if isinstance(error, Diverged):
        return f"diverged: {message}"
    cause = error.__cause__ if isinstance(error, CompileFailed) and error.__cause__ else error
    text = f"{type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''}".rstrip(": ")
    return f"{kind_of(error)}: {text}"


def kind_of(error: BaseException) -> str:
    text = str(error).lower()
    if isinstance(error, Diverged):
        return "diverged"
    if isinstance(error, MemoryError) or _named(error, "OutOfMemoryError") or "out of memory" in text \
            or "can't allocate memory" in text:
        return "oom"
    if isinstance(error, CompileFailed) or type(error).__module__.startswith(("torch._dynamo", "torch._inductor",
                                                                              "torch.jit")) \
            or "skipping cudagraphs" in text:  # Inductor's words when it falls back from CUDA graphs
        return "compile"
    if "dataloader worker" in text or "dataloader timed out" in text:
        return "worker"
    return "error"


def _named(error: BaseException, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(error).__mro__)

"""BatchSize: the number of samples per optimizer step."""
from __future__ import annotations

from typing import Any

from strategies.base import Strategy


class BatchSize(Strategy):
    """Sets the DataLoader's ``batch_size``.

    Larger batches amortise per-step overhead (Python, kernel launches, the
    optimizer) over more samples and fill wide hardware, so samples/s rises
    until the device is saturated or memory runs out. It changes the
    optimisation itself: fewer steps per epoch and a different gradient noise,
    so accuracy after a fixed number of epochs can drop unless the learning
    rate is retuned. Compare it on time-to-accuracy, not samples/s alone.
    """

    name = "batch_size"
    changes_numerics = True

    def __init__(self, n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"BatchSize: n must be a whole number >= 1, got {n!r}")
        self.n = n

    def loader_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["batch_size"] = self.n
        return kwargs

    def params(self) -> dict[str, Any]:
        return {"n": self.n}

"""Drives a study: asks the planner, runs each measurement in a fresh trial process, records it."""
from ablate._lazy import exports

__all__ = ["Objective", "Recovery", "Runner"]
__getattr__, __dir__ = exports(__name__, {
    "Runner": "runner",
    "Objective": "objective",
    "Recovery": "recovery",
})

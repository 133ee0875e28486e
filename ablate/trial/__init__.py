"""One combination measured in a fresh interpreter: the loop, the clock, the process, its machine."""
from ablate._lazy import exports

__all__ = ["Interpreters", "Machine", "StepClock", "TrialFailed", "TrialSpec", "evaluate", "run_in_fresh_process",
           "train"]
__getattr__, __dir__ = exports(__name__, {
    "TrialSpec": "process",
    "TrialFailed": "process",
    "run_in_fresh_process": "process",
    "StepClock": "measure",
    "Interpreters": "interpreters",
    "Machine": "machine",
    "train": "loop",
    "evaluate": "loop",
})

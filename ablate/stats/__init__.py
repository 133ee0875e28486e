"""Pure functions of stored records, each proven by simulation: the protocol, race, parity, speed-ups, planner."""
from ablate._lazy import exports

__all__ = ["Comparison", "DeviceComparisons", "Interval", "Planned", "Planner", "Speedup", "compare", "compare_stored"]
__getattr__, __dir__ = exports(__name__, {
    "Comparison": "comparison",
    "DeviceComparisons": "comparison",
    "compare": "comparison",
    "compare_stored": "comparison",
    "Planner": "planner",
    "Planned": "planner",
    "Speedup": "speedups",
    "Interval": "speedups",
})

"""Pure functions of stored records, proven by simulation: screening, the race, the answer and the parts they share."""
from ablate._lazy import exports

__all__ = ["Comparison", "DeviceComparisons", "Interval", "Planned", "Planner", "Speedup", "compare", "compare_stored"]
__getattr__, __dir__ = exports(__name__, {
    "Comparison": "answer.comparison",
    "DeviceComparisons": "answer.comparison",
    "compare": "answer.comparison",
    "compare_stored": "answer.comparison",
    "Planner": "planner",
    "Planned": "planner",
    "Speedup": "speedups",
    "Interval": "speedups",
})

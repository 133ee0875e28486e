"""What a user reads, rendered from a computed Comparison: the table, the report, its answer and figures."""
from ablate._lazy import exports

__all__ = ["Report", "build", "render", "render_compact"]
__getattr__, __dir__ = exports(__name__, {
    "render": "results",
    "render_compact": "results",
    "build": "report",
    "Report": "report",
})

"""MLflow, the only package that imports it: the tracker, the study's parent run, its view, sync and UI."""
from ablate._lazy import exports

__all__ = ["ParentRun", "Tracker", "push_missing", "write_reports"]
__getattr__, __dir__ = exports(__name__, {
    "Tracker": "tracker",
    "ParentRun": "parent_run",
    "write_reports": "parent_run",
    "push_missing": "sync",
})

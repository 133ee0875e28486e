"""What a study trains: models by name (its own, hf:, timm:, torchvision:), data sets, tasks."""
from ablate._lazy import exports

__all__ = ["DATASETS", "DataUnavailable", "MODELS", "Quality", "Splits", "TEXT_DATASETS", "Task", "lookup", "unknown"]
__getattr__, __dir__ = exports(__name__, {
    "MODELS": "models",
    "DATASETS": "data",
    "TEXT_DATASETS": "data",
    "DataUnavailable": "data",
    "Splits": "data",
    "Task": "tasks",
    "Quality": "tasks",
    "lookup": "registry",
    "unknown": "registry",
})

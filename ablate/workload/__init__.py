"""What a study trains: models by name (its own, hf:, timm:, torchvision:), data sets, tasks."""
from ablate._lazy import exports

__all__ = ["DATASETS", "DataUnavailable", "DatasetFactory", "LossFunction", "MODELS", "ModelFactory", "Quality",
           "Splits", "TASKS", "TEXT_DATASETS", "Task", "lookup", "unknown"]
__getattr__, __dir__ = exports(__name__, {
    "MODELS": "models",
    "DATASETS": "data",
    "TEXT_DATASETS": "data",
    "DataUnavailable": "data",
    "Splits": "data",
    "Task": "tasks",
    "TASKS": "tasks",
    "Quality": "tasks",
    "ModelFactory": "signatures",
    "DatasetFactory": "signatures",
    "LossFunction": "signatures",
    "lookup": "registry",
    "unknown": "registry",
})

"""ablate: measure which PyTorch training speed-ups are worth it, on your model and hardware.

What your own study code imports, all from here (docs/api.md): the splits your dataset returns, the signatures
of your model, dataset and loss, and the built-in names a study can give. Imported on first use (PEP 562), so
`import ablate` costs no torch; the packages below may move, these names stay.
"""
from typing import TYPE_CHECKING

from ablate._lazy import exports

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers and editors see; at run time `__getattr__` imports a name on first use
    from ablate.workload.data import DATASETS, DataUnavailable, Splits
    from ablate.workload.models import MODELS
    from ablate.workload.signatures import DatasetFactory, LossFunction, ModelFactory
    from ablate.workload.tasks import TASKS

__all__ = ["DATASETS", "DataUnavailable", "DatasetFactory", "LossFunction", "MODELS", "ModelFactory", "Splits",
           "TASKS"]
__getattr__, __dir__ = exports(__name__, {name: "workload" for name in __all__})

"""What ablate calls in your code: the types of your own model, dataset and loss.

A study names each by import path (``model: mypackage.nets:MyNet``, ``dataset: mypackage.data:splits``,
``task: mypackage.losses:my_loss``; docs/own-model.md), and every measurement imports it again in its own fresh
interpreter. That is why there is no registration call: a name added to `MODELS` in your script would not
reach the interpreter that trains. These types let a checker hold your module to what ablate calls (ablate ships
`py.typed`). The model and the dataset take your study's own options as keywords, which no fixed signature can
name, so their types check what they return; the loss takes none, so its type is exact.

The types are written as strings: importing this module costs no torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import torch

    from ablate.workload.data import Splits

# ``model:`` - a class or function called with the study's ``model_options`` (and ``seq_len`` where it takes one,
# from the task), returning the module to train.
ModelFactory = Callable[..., "torch.nn.Module"]
# ``dataset:`` - called with the data root (``$ABLATE_DATA_DIR``, else ``./data``) and the study's
# ``dataset_options``, returning the train and test splits; raise `DataUnavailable` where the files cannot be had
# (the run says so in one line).
DatasetFactory = Callable[..., "Splits"]
# ``task:`` - the loss of one batch, already on the device; its mean over the test batches is the study's quality
# figure (``target_loss``).
LossFunction = Callable[["torch.nn.Module", Any], "torch.Tensor"]

"""The one owner of the stored format: records, the Optuna storage, claims, seeds and the study lock."""
from ablate._lazy import exports

__all__ = ["BASELINE", "Busy", "Record", "State", "StudyRecord", "create_study", "default_storage", "study_lock"]
__getattr__, __dir__ = exports(__name__, {
    "Record": "records",
    "StudyRecord": "records",
    "State": "records",
    "BASELINE": "records",
    "create_study": "storage",
    "default_storage": "storage",
    "study_lock": "lock",
    "Busy": "lock",
})

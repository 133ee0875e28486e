"""The one owner of the stored format: records (a trial's, the study's), the Optuna storage, claims, seeds and the
study lock."""
from ablate._lazy import exports

__all__ = ["Busy", "Record", "State", "StudyRecord", "create_study", "default_storage", "study_lock"]
__getattr__, __dir__ = exports(__name__, {
    "Record": "records",
    "StudyRecord": "study_record",
    "State": "records",
    "create_study": "storage",
    "default_storage": "storage",
    "study_lock": "lock",
    "Busy": "lock",
})

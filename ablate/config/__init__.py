"""The study file and the choices of a combination: YAML parsed into validated, frozen objects."""
from ablate._lazy import exports

__all__ = ["BASELINE", "Budget", "Option", "ProtocolSettings", "Study", "StudyError", "available", "compose_options",
           "load"]
__getattr__, __dir__ = exports(__name__, {
    "Study": "schema",
    "Budget": "schema",
    "load": "study",
    "available": "catalogue",
    "StudyError": "validate",
    "Option": "choices",
    "BASELINE": "choices",
    "compose_options": "choices",
    "ProtocolSettings": "design",
})

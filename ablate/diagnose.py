"""Moved: a shim until the release `ablate._moved.MOVED` names (docs/api.md, "Moved names")."""
from ablate._moved import forward

__getattr__, __dir__ = forward(__name__)

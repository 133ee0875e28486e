"""A trial interpreter's start-up is a measured budget (docs/measuring.md): what it imports - the preload, and
every module of the floors a trial stands on (workload, config, trial) - pulls in no statistics, plotting or
tracking library. `python -X importtime` lists every module the interpreter imported."""
from __future__ import annotations

import subprocess
import sys

HEAVY = {"scipy", "statsmodels", "matplotlib", "mlflow"}
ENTRY = """
import importlib, pkgutil
import ablate.config, ablate.trial, ablate.workload
from ablate.trial.interpreters import _preload
_preload()
for package in (ablate.workload, ablate.config, ablate.trial):
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
"""


def _imported(script: str) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {name.split(".")[0] for name in lines}


def test_a_trial_interpreter_imports_no_statistics_plotting_or_tracking_library():
    imported = _imported(ENTRY)
    assert "torch" in imported and "ablate" in imported  # the listing is read as it should be
    assert imported & HEAVY == set()


def test_the_check_sees_a_heavy_import():
    assert "scipy" in _imported("import ablate.stats.contrasts")

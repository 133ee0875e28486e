"""What a non-editable `pip install .` gets: every package of ablate and strategies, the shipped studies (so
`ablate list` and `ablate run mnist_cnn` work from an installed wheel, not only from a checkout), and both packages'
py.typed (so a user's type checker reads their annotations: PEP 561)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_every_package_and_the_studies(tmp_path):
    source = tmp_path / "source"  # setuptools writes build/ beside the sources: a copy keeps the checkout clean
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("ablate", "strategies"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path), str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("ablate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    studies = {f"ablate/studies/{p.name}" for p in (ROOT / "ablate" / "studies").glob("*.yaml")}
    assert studies and studies <= names
    packages = {p.relative_to(ROOT).as_posix() for p in [*ROOT.glob("ablate/**/__init__.py"),
                                                         *ROOT.glob("strategies/__init__.py")]}
    assert packages <= names
    assert {"ablate/py.typed", "strategies/py.typed"} <= names

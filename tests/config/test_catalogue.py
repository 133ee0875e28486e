"""`ablate list` reads the studies, strategies and presets from their files without importing them
(ablate.config.catalogue); what it reads is what the imported registry holds."""
from __future__ import annotations

from pathlib import Path

import pytest

import strategies
from ablate.config import catalogue, study
from ablate.config.choices import targets_of
from strategies import PRESETS, REGISTRY, preset


def _imported() -> list[catalogue.Listed]:
    return [catalogue.Listed(name, targets_of(cls), cls.__doc__.strip().splitlines()[0])
            for name, cls in REGISTRY.items()]


def test_the_strategies_read_from_source_are_the_registry_with_its_targets_and_docstrings_first_lines():
    read = catalogue._read_strategies(catalogue._package())
    assert read == _imported()
    assert dict((s.name, s.targets) for s in read)["compile"] == ("compute", "launch")  # in TARGETS' order


def test_the_targets_the_source_can_name_are_read_from_the_literal_type_itself(tmp_path: Path):
    base = tmp_path / "base.py"
    base.write_text('Phase = Literal["data", "copy"]\nTarget = Literal[Phase, "memory"]\n')
    assert catalogue._literal(catalogue._tree(base), "Target") == ["data", "copy", "memory"]


def test_targets_of_another_shape_are_listed_by_importing_the_package(tmp_path: Path, monkeypatch):
    package = catalogue._package()
    for path in package.glob("*.py"):
        text = path.read_text()
        if path.name == "amp.py":  # a targets the reading does not know: a name, not a set of strings
            text = text.replace('targets = frozenset({"compute"})', "targets = COMPUTE")
            assert "targets = COMPUTE" in text
        (tmp_path / path.name).write_text(text)
    with pytest.raises(catalogue._Unread, match="AMP.targets"):
        catalogue._read_strategies(tmp_path)
    monkeypatch.setattr(catalogue, "_package", lambda: tmp_path)
    assert catalogue.strategies() == _imported()


def test_each_presets_members_read_from_source_build_the_presets_stack():
    read = catalogue._read_presets(catalogue._package())
    assert [name for name, _ in read] == list(PRESETS)
    namespace = vars(strategies)
    for name, members in read:
        built = [eval(member, namespace) for member in members]  # the package's own source
        assert list(map(repr, built)) == list(map(repr, preset(name).members)), name
    assert dict(read)["O2"] == ["HalfPrecision(dtype='fp16', master_weights=True)"] and dict(read)["O0"] == []


def test_a_source_of_another_shape_is_listed_by_importing_the_package(tmp_path: Path, monkeypatch):
    (tmp_path / "__init__.py").write_text("from strategies.registry import REGISTRY\n")  # no tuple of classes
    (tmp_path / "presets.py").write_text("PRESETS = make()\n")
    monkeypatch.setattr(catalogue, "_package", lambda: tmp_path)
    assert catalogue.strategies() == _imported()
    assert catalogue.presets() == [(name, [repr(m) for m in preset(name).members]) for name in PRESETS]


def test_the_studies_and_their_descriptions_are_those_the_study_files_load_with():
    assert catalogue.studies() == [(name, " ".join(study.load(name, "cpu").description.split()))
                                   for name in catalogue.available()]
    assert study.find("mnist_cnn") == catalogue.STUDIES_DIR / "mnist_cnn.yaml"  # the one folder both read

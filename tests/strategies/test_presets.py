"""Presets: the four Apex mixed-precision levels as named bundles of strategies."""
from __future__ import annotations

import pytest

from strategies import AMP, PRESETS, ChannelsLast, Compile, ConflictError, Float8, HalfPrecision, compose, preset


def test_the_four_classic_levels():
    assert list(PRESETS)[:4] == ["O0", "O1", "O2", "O3"]
    assert len(preset("O0")) == 0  # pure fp32: the plain loop
    (o1,) = preset("O1")
    assert isinstance(o1, AMP) and o1.dtype == "fp16"
    (o2,) = preset("O2")
    assert isinstance(o2, HalfPrecision) and (o2.dtype, o2.master_weights) == ("fp16", True)
    (o3,) = preset("O3")
    assert isinstance(o3, HalfPrecision) and (o3.dtype, o3.master_weights) == ("fp16", False)


def test_a_preset_is_fresh_each_time_and_composes():
    assert preset("O1").members[0] is not preset("O1").members[0]  # no shared GradScaler between stacks
    stack = compose(preset("O2"), ChannelsLast())
    assert [m.name for m in stack] == ["half_precision", "channels_last"]
    with pytest.raises(ConflictError, match="both own backward and step"):
        compose(preset("O1"), preset("O3"))


def test_unknown_preset_is_one_line_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"^unknown preset 'O4'; choose one of: O0, O1, O2, O3, float8_compile, "
                                         r"float8_rowwise_compile$"):
        preset("O4")


def test_float8_the_way_torchao_trains_it_is_float8_then_compile():
    # Float8 alone leaves its casts and scale reductions unfused; the bundle lets a study measure it with compile
    # without crossing compile with every other technique (benchmarks/gpu/transformers.yaml).
    assert list(PRESETS)[4:] == ["float8_compile", "float8_rowwise_compile"]
    for name, recipe in (("float8_compile", "tensorwise"), ("float8_rowwise_compile", "rowwise")):
        float8, compiled = preset(name)
        assert isinstance(float8, Float8) and float8.recipe == recipe  # converts first (order 10)...
        assert isinstance(compiled, Compile) and compiled.params() == Compile().params()  # ...then compiles (100)
        assert preset(name).one_off_cost and preset(name).caches_compiled_code()
        assert "float8 training is CUDA-only" in preset(name).check("cpu")

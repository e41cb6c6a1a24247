"""The project error classes (cuzk_jax.errors): hierarchy, exit codes, and one class under its old names."""

import pytest

from cuzk_jax import errors


def test_hierarchy_and_exit_codes():
    for cls in (errors.BadInput, errors.SynthesisError, errors.Unsatisfied, errors.FormatError,
                errors.KeyFormatError):
        assert issubclass(cls, errors.CuzkError) and issubclass(cls, ValueError)  # `except ValueError` still works
        assert cls.exit_code == 2
    assert issubclass(errors.ToolchainMissing, RuntimeError) and errors.ToolchainMissing.exit_code == 2
    assert errors.ProofRejected.exit_code == 1 and not issubclass(errors.ProofRejected, ValueError)


def test_unsatisfied_message():
    e = errors.Unsatisfied(3, "sha/round 2", partition=1)
    assert (e.index, e.name, e.partition) == (3, "sha/round 2", 1)
    assert str(e) == "partition 1: constraint #3 'sha/round 2' is not satisfied"
    assert str(errors.Unsatisfied(0, "x")) == "constraint #0 'x' is not satisfied"


def test_old_locations_reexport_the_same_class():
    from cuzk_jax import circuits
    from cuzk_jax.circuits import cs
    from cuzk_jax.snarkjs import binfile, toolchain

    assert cs.Unsatisfied is circuits.Unsatisfied is errors.Unsatisfied
    assert cs.SynthesisError is errors.SynthesisError
    assert binfile.FormatError is errors.FormatError
    assert toolchain.ToolchainMissing is errors.ToolchainMissing


def test_unknown_circuit_is_bad_input():
    from cuzk_jax.circuits import base

    with pytest.raises(errors.BadInput, match="unknown circuit 'nope'; available: cube, merkle_inclusion"):
        base.get_circuit("nope")
    with pytest.raises(ValueError, match="unknown preset"):
        base.get_circuit("cube", "huge")


def test_catalog_names_match_the_classes():
    from cuzk_jax.circuits import base

    for name in base.CATALOG:
        assert base._lookup(name).name == name


def test_key_format_error_is_the_project_class():
    from cuzk_jax.groth16 import data_structures

    assert data_structures.KeyFormatError is errors.KeyFormatError

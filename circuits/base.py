"""Circuit API and registry: ``get_circuit(name, preset)`` -> a :class:`Circuit`.

A circuit describes one R1CS *shape*. ``synthesize(cs, inputs)`` writes its constraints into a
:class:`~cuzk_jax.circuits.cs.ConstraintSystem`; ``inputs`` is a dict of witness values (from
``sample_inputs``) or ``None`` for structure-only synthesis. Synthesis must emit the same constraints whatever the
input values (partitions of one circuit share ONE R1CS), which is what lets the prover build the structure once
(:meth:`Circuit.r1cs`) and only the witness per partition (:meth:`Circuit.witness`).
"""

from __future__ import annotations

import copy
import importlib
import random
from typing import Any, ClassVar

from cuzk_jax.errors import BadInput

from .cs import ConstraintSystem
from .r1cs import R1CS, Witness


class Circuit:
    name: ClassVar[str] = ""
    PRESETS: ClassVar[dict] = {}
    DEFAULT_PRESET: ClassVar[str] = "default"

    def __init__(self, preset: str | None = None, **overrides):
        preset = preset or self.DEFAULT_PRESET
        if preset not in self.PRESETS:
            raise BadInput(f"unknown preset {preset!r} for circuit {self.name!r}; "
                             f"available: {', '.join(self.PRESETS)}")
        params = dict(self.PRESETS[preset])
        params.pop("doc", None)
        unknown = set(overrides) - set(params)
        if unknown:
            raise BadInput(f"unknown parameter(s) {sorted(unknown)} for circuit {self.name!r}; "
                             f"parameters: {sorted(params)}")
        params.update(overrides)
        self.preset = preset
        self.params = params
        self._validate()
        self._r1cs: R1CS | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({self.preset!r}, {args})"

    # -- to implement --------------------------------------------------------------------------------------------------
    def _validate(self) -> None:
        pass

    def synthesize(self, cs: ConstraintSystem, inputs: dict | None = None) -> None:
        raise NotImplementedError

    def sample_inputs(self, partition: int = 0, seed: int = 0) -> dict:
        raise NotImplementedError

    def public_inputs(self, inputs: dict) -> list[int]:
        raise NotImplementedError

    # -- helpers -----------------------------------------------------------------------------------------------------
    def _rng(self, partition: int, seed: int) -> random.Random:
        if partition < 0:
            raise BadInput(f"partition must be >= 0, got {partition}")
        # str seeding is deterministic across runs (hashed with SHA-512 by the random module)
        return random.Random(f"{self.name}:{self.preset}:{sorted(self.params.items())}:{seed}:{partition}")

    def r1cs(self) -> R1CS:
        """The R1CS (structure-only synthesis; cached on the instance)."""
        if self._r1cs is None:
            cs = ConstraintSystem("structure")
            self.synthesize(cs, None)
            self._r1cs = cs.to_r1cs()
        return self._r1cs

    def without_r1cs(self) -> "Circuit":
        """A shallow copy without the cached R1CS: name, preset and parameters only (what a synthesis worker
        process needs; cheap to pickle)."""
        c = copy.copy(self)
        c._r1cs = None
        return c

    def witness(self, inputs: dict, check_shape: bool = True) -> Witness:
        """The assignment for ``inputs`` (witness-only synthesis: no constraints recorded)."""
        cs = ConstraintSystem("witness")
        self.synthesize(cs, inputs)
        w = cs.witness()
        if check_shape and self._r1cs is not None:
            self._r1cs.check_shape(w)
        return w

    def full(self, inputs: dict) -> tuple[R1CS, Witness]:
        """Constraints and values in one pass (tests and debugging)."""
        cs = ConstraintSystem("full")
        self.synthesize(cs, inputs)
        return cs.to_r1cs(), cs.witness()


# The catalog: circuit name -> "module:Class" inside this package. A circuit module imports this one (for
# :class:`Circuit`), never the other way round: the class is imported on first lookup, so importing the registry
# imports no circuit, and ``get_circuit("cube")`` imports only ``cube``.
CATALOG: dict[str, str] = {
    "cube": "cube:Cube",
    "merkle_inclusion": "merkle_inclusion:MerkleInclusion",
    "porep_like": "porep_like:PorepLike",
}
_REGISTRY: dict[str, type] = {}  # loaded catalog entries and circuits added with register()


def register(cls):
    """Add a circuit class outside the catalog (a test's or a user's circuit) under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def _lookup(name: str) -> type:
    cls = _REGISTRY.get(name)
    if cls is None:
        if name not in CATALOG:
            raise BadInput(f"unknown circuit {name!r}; available: {', '.join(_names())}")
        module, _, attr = CATALOG[name].partition(":")
        cls = _REGISTRY[name] = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
    return cls


def _names() -> list[str]:
    return sorted(set(CATALOG) | set(_REGISTRY))


def get_circuit(name: str, preset: str | None = None, **overrides) -> Circuit:
    """``get_circuit("porep_like", "small")`` -> a circuit instance (parameters may be overridden by keyword)."""
    return _lookup(name)(preset, **overrides)


def list_circuits() -> dict[str, list[str]]:
    """``{circuit name: [preset names]}``."""
    return {n: list(_lookup(n).PRESETS) for n in _names()}


def presets(name: str) -> dict[str, dict[str, Any]]:
    return {k: dict(v) for k, v in _lookup(name).PRESETS.items()}

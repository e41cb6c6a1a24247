"""Circuit API and registry: ``get_circuit(name, preset)`` -> a :class:`Circuit`.

A circuit describes one R1CS *shape*. ``synthesize(cs, inputs)`` writes its constraints into a
:class:`~cuzk_jax.circuits.cs.ConstraintSystem`; ``inputs`` is a dict of witness values (from
``sample_inputs``) or ``None`` for structure-only synthesis. Synthesis must emit the same constraints whatever the
input values (partitions of one circuit share ONE R1CS), which is what lets the prover build the structure once
(:meth:`Circuit.r1cs`) and only the witness per partition (:meth:`Circuit.witness`).
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from .cs import ConstraintSystem
from .r1cs import R1CS, Witness


class Circuit:
    name: ClassVar[str] = ""
    PRESETS: ClassVar[dict] = {}
    DEFAULT_PRESET: ClassVar[str] = "default"

    def __init__(self, preset: str | None = None, **overrides):
        preset = preset or self.DEFAULT_PRESET
        if preset not in self.PRESETS:
            raise ValueError(f"unknown preset {preset!r} for circuit {self.name!r}; "
                             f"available: {', '.join(self.PRESETS)}")
        params = dict(self.PRESETS[preset])
        params.pop("doc", None)
        unknown = set(overrides) - set(params)
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)} for circuit {self.name!r}; "
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
            raise ValueError(f"partition must be >= 0, got {partition}")
        # str seeding is deterministic across runs (hashed with SHA-512 by the random module)
        return random.Random(f"{self.name}:{self.preset}:{sorted(self.params.items())}:{seed}:{partition}")

    def r1cs(self) -> R1CS:
        """The R1CS (structure-only synthesis; cached on the instance)."""
        if self._r1cs is None:
            cs = ConstraintSystem("structure")
            self.synthesize(cs, None)
            self._r1cs = cs.to_r1cs()
        return self._r1cs

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


_REGISTRY: dict[str, type] = {}


def register(cls):
    _REGISTRY[cls.name] = cls
    return cls


def get_circuit(name: str, preset: str | None = None, **overrides) -> Circuit:
    """``get_circuit("porep_like", "small")`` -> a circuit instance (parameters may be overridden by keyword)."""
    _load()
    if name not in _REGISTRY:
        raise ValueError(f"unknown circuit {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](preset, **overrides)


def list_circuits() -> dict[str, list[str]]:
    """``{circuit name: [preset names]}``."""
    _load()
    return {n: list(c.PRESETS) for n, c in sorted(_REGISTRY.items())}


def presets(name: str) -> dict[str, dict[str, Any]]:
    _load()
    if name not in _REGISTRY:
        raise ValueError(f"unknown circuit {name!r}")
    return {k: dict(v) for k, v in _REGISTRY[name].PRESETS.items()}


def _load() -> None:
    from . import cube, merkle_inclusion, porep_like  # noqa: F401  (registration side effect)

"""The classic smallest circuit: knowledge of ``x`` with ``x^3 + x + 5 = y`` (public ``y``).

Constraints (3): ``x * x = x2``, ``x2 * x = x3``, ``(x3 + x + 5) * 1 = y``. z = [1, y, x, x2, x3].
"""

from __future__ import annotations

from cuzk_jax.reference.constants import R

from .base import Circuit
from .gadgets.num import alloc_input_num, alloc_num, enforce_equal, mul


class Cube(Circuit):
    name = "cube"
    PRESETS = {"default": {"doc": "x^3 + x + 5 = y: 3 constraints, 1 public input"}}

    def synthesize(self, cs, inputs=None):
        y = alloc_input_num(cs, None if inputs is None else inputs["y"], "y")
        x = alloc_num(cs, None if inputs is None else inputs["x"], "x")
        x2 = mul(cs, x, x, "x^2")
        x3 = mul(cs, x2, x, "x^3")
        enforce_equal(cs, x3 + x + 5, y, "x^3 + x + 5 = y")

    def sample_inputs(self, partition=0, seed=0):
        x = 3 if (partition, seed) == (0, 0) else self._rng(partition, seed).randrange(R)
        return {"x": x, "y": (x ** 3 + x + 5) % R}

    def public_inputs(self, inputs):
        return [inputs["y"]]

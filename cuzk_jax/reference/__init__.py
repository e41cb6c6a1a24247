"""Reference (oracle) layer: Python ints only, never imports jax. Slow and obviously right."""

from . import constants
from .field import fq, fq2, fr, PrimeField, QuadraticExtension

__all__ = ["constants", "fq", "fq2", "fr", "PrimeField", "QuadraticExtension"]

"""Gadgets: reusable constraint fragments (boolean, num, uint32, sha256, poseidon, merkle)."""

from . import boolean, merkle, num, poseidon, sha256, uint32
from .boolean import Boolean
from .num import Num
from .uint32 import UInt32

__all__ = ["boolean", "merkle", "num", "poseidon", "sha256", "uint32", "Boolean", "Num", "UInt32"]

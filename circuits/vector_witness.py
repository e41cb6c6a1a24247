"""Batched witness synthesis: the gadgets run once for many circuit instances, with numpy arrays as values.

The Python builder (:mod:`.cs`) calls a gadget per gate and computes one Python int per wire. A circuit made of
identical blocks (porep_like: one block per challenge, the same gates for every challenge and every partition) can
instead run the *same* gadget code once over a batch of ``N`` instances (challenge ``j`` of partition ``p`` for every
``(p, j)`` of a task): every value is then a numpy array of ``N`` entries -- bits ``uint8``, 32-bit words ``int64``,
field elements ``object`` arrays of Python ints in ``[0, r)`` -- and the per-gate Python cost is paid once per
batch instead of once per instance. Wire order is the builder's by construction (the same code allocates the same
wires in the same order), so the witness equals the builder's wire for wire; tests check it on small presets.

:class:`BatchCS` is the constraint system of such a run (witness mode: constraints are only counted). It stores
bit wires in one growing ``(rows, N)`` uint8 buffer (no Python object per wire is kept) and field wires as object
arrays (about 1 % of a SHA-256-heavy circuit's wires).

:func:`~.porep_like.fill_z` turns a batch into the prover's layout: Fr limbs ``(8, num_vars)`` uint32 in Montgomery
form per partition (:func:`cuzk_jax.circuits.r1cs.stack_z`'s layout); bits become 0 or the limbs of ``R mod r``
with numpy, field wires their limbs (Montgomery form as ``(v << 256) mod r``), written chunk by chunk (through
``os.pwrite`` into a file-backed memmap).
"""

from __future__ import annotations

import numpy as np

from cuzk_jax import encoding
from cuzk_jax.errors import SynthesisError
from cuzk_jax.reference.constants import R

from .cs import ConstraintSystem

__all__ = ["BatchCS", "as_fr_array", "one_limbs"]

_ARANGE = np.arange(1 << 10, dtype=np.int64)


def as_fr_array(value, n: int) -> np.ndarray:
    """``value`` (an int, or an array of N ints) as an object array of N Python ints reduced mod r."""
    if isinstance(value, np.ndarray):
        if value.shape != (n,):
            raise SynthesisError(f"batched value has shape {value.shape}, expected ({n},)")
        out = np.empty(n, object)
        out[:] = [int(v) % R for v in value.tolist()]
        return out
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SynthesisError(f"witness value must be an int, got {type(value).__name__}")
    out = np.empty(n, object)
    out[:] = [int(value) % R] * n
    return out


def one_limbs(montgomery: bool = True) -> np.ndarray:
    """The limbs (8,) uint32 of the field element 1 (``R mod r`` in Montgomery form)."""
    return encoding.ints_to_limbs([1], "fr", montgomery=montgomery)[:, 0]


class BatchCS(ConstraintSystem):
    """A witness-mode constraint system whose values are arrays over ``n`` instances (see the module docstring).

    After synthesis: ``bit_aux`` (int64, aux indices of bit wires, ascending), ``bits`` (``(len(bit_aux), n)``
    uint8), ``fr_aux`` / ``fr_values`` (aux indices and object arrays of the field wires), ``input_values`` (one
    object array per input, index 0 = ONE); ``memo``: a dict the gadgets may use to reuse the values of an
    operation they already ran on the same inputs in this run.
    """

    batched = True

    def __init__(self, n: int, capacity: int = 1 << 14):
        super().__init__("witness")
        if n < 1:
            raise ValueError(f"BatchCS needs at least one instance, got {n}")
        self.n = n
        self.input_values = [as_fr_array(1, n)]
        self.aux_values = None  # values live in the buffers below
        self._bits = np.empty((capacity, n), np.uint8)
        self._bit_aux = np.empty(capacity, np.int64)
        self._nb = 0
        self.fr_aux: list[int] = []
        self.fr_values: list[np.ndarray] = []
        self._fr_index: dict[int, int] = {}
        self.memo: dict = {}  # gadgets' per-run cache of values by inputs (Poseidon permutations), dropped with the cs

    def _resolve(self, value, name: str, kind: str):
        if callable(value):
            value = value()
        if value is None:
            where = f"{self.current_namespace}/{name}".strip("/") or "<unnamed>"
            raise SynthesisError(f"{kind} '{where}': missing witness value in batched witness mode")
        return as_fr_array(value, self.n)

    def alloc_raw(self, value) -> int:
        j = self.num_aux
        self.num_aux = j + 1
        if isinstance(value, np.ndarray) and value.dtype == np.uint8:
            k = self._nb
            if k == len(self._bit_aux):
                self._bits = np.concatenate([self._bits, np.empty_like(self._bits)])
                self._bit_aux = np.concatenate([self._bit_aux, np.empty_like(self._bit_aux)])
            self._bits[k] = value
            self._bit_aux[k] = j
            self._nb = k + 1
        else:
            if value is None:
                raise SynthesisError("alloc_raw: missing witness value in batched witness mode")
            if not (isinstance(value, np.ndarray) and value.dtype == object):
                value = as_fr_array(value, self.n)
            self._fr_index[j] = len(self.fr_values)
            self.fr_aux.append(j)
            self.fr_values.append(value)
        return -1 - j

    def alloc_fr_rows(self, rows) -> int:
        """Allocate ``len(rows)`` consecutive private field wires with the object arrays ``rows`` (each ``n`` Python
        ints in ``[0, r)``) as values; returns the first one's aux index (what ``alloc_raw`` does per wire)."""
        rows = list(rows)
        k = len(rows)
        j0 = self.num_aux
        self.num_aux = j0 + k
        base = len(self.fr_values)
        self.fr_aux.extend(range(j0, j0 + k))
        self.fr_values.extend(rows)
        self._fr_index.update(zip(range(j0, j0 + k), range(base, base + k)))
        return j0

    def reserve_bits(self, k: int) -> tuple[int, np.ndarray]:
        """Allocate ``k`` consecutive private bit wires whose values the caller writes into the returned ``(k, n)``
        uint8 view of the buffer (before any further allocation); returns ``(first aux index, view)``."""
        j0 = self.num_aux
        self.num_aux = j0 + k
        nb = self._nb
        while nb + k > len(self._bit_aux):
            self._bits = np.concatenate([self._bits, np.empty_like(self._bits)])
            self._bit_aux = np.concatenate([self._bit_aux, np.empty_like(self._bit_aux)])
        self._bit_aux[nb:nb + k] = _ARANGE[:k] + j0 if k <= len(_ARANGE) else np.arange(j0, j0 + k)
        self._nb = nb + k
        return j0, self._bits[nb:nb + k]

    def alloc_bits_block(self, mat: np.ndarray) -> int:
        """Allocate ``len(mat)`` consecutive private bit wires with the rows of ``mat`` (``(k, n)`` uint8 0/1) as
        values; returns the first one's aux index (the gadgets' word-level fast paths; constraints are counted by
        the caller)."""
        j0, view = self.reserve_bits(mat.shape[0])
        view[...] = mat
        return j0

    @property
    def bits(self) -> np.ndarray:
        return self._bits[:self._nb]

    @property
    def bit_aux(self) -> np.ndarray:
        return self._bit_aux[:self._nb]

    def value_raw(self, idx: int):
        if idx >= 0:
            return self.input_values[idx]
        j = -1 - idx
        k = self._fr_index.get(j)
        if k is not None:
            return self.fr_values[k]
        pos = int(np.searchsorted(self.bit_aux, j))
        return self._bits[pos].copy()

    def witness(self):
        raise SynthesisError("BatchCS holds arrays over a batch: read bits / fr_values, not witness()")

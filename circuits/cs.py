"""Constraint-system builder in the spirit of bellpepper (``ConstraintSystem``, ``alloc``, ``enforce``, namespaces).

A rank-1 constraint system (R1CS) over the BLS12-381 scalar field Fr is a list of constraints
``<A_i, z> * <B_i, z> = <C_i, z>`` over one assignment vector ``z``. This builder records the sparse rows of A, B
and C while a circuit is *synthesized* (run as Python code), and/or the witness values of every variable.

Variable layout (the one the Groth16 prover relies on)::

    z = [1, public_1, ..., public_k, private_1, ..., private_m]
         ^ index 0 is the constant ONE
         \\_____________________/ "inputs": num_inputs = 1 + k  (Groth16's IC / verifying-key query covers these)
                                     \\__________________________/ "aux": num_aux = m (Groth16's L query)

Public inputs and private variables may be allocated in any interleaved order during synthesis; while building, an
input is referred to by its index ``i >= 0`` (0 = ONE) and private variable number ``j`` by the *encoded* index
``-1 - j``. :meth:`ConstraintSystem.to_r1cs` maps both to their final column ``i`` / ``num_inputs + j`` in ``z``.

Modes (``ConstraintSystem(mode=...)``):

* ``"structure"`` -- records constraints, no values (setup: the R1CS shape is independent of the witness);
* ``"witness"``   -- records values only; ``enforce`` merely counts (per-partition witness generation);
* ``"full"``      -- both (tests, debugging: :meth:`ConstraintSystem.check` names the first failing constraint).

Speed: synthesis of 2^20 constraints must take seconds, not minutes, so nothing is allocated per constraint
except appends to flat ``array.array`` buffers (column, coefficient id) and to a per-row namespace/label id.
Coefficients are interned in a table (most are 1, -1 or powers of two), so the stored matrices are integer arrays;
the device evaluator gathers coefficient limbs from the small table. Gadgets use the raw fast path
(``enforce_raw`` with lists of ``(index, coeff)`` pairs; duplicate indices are allowed and simply add up); users
get :class:`LinearCombination` with operator overloading.
"""

from __future__ import annotations

import contextlib
from array import array
from typing import Callable

import numpy as np

from cuzk_jax.errors import SynthesisError, Unsatisfied  # noqa: F401  (re-exported: their old home)
from cuzk_jax.reference.constants import R

from .r1cs import R1CS, SparseMatrix, Witness

ONE_INDEX = 0  # index of the constant-one variable (an input)
MODES = ("structure", "witness", "full")


# ---------------------------------------------------------------------------------------------------------------
# Variables and linear combinations
# ---------------------------------------------------------------------------------------------------------------


class Variable:
    """A variable of the constraint system (encoded index: ``>= 0`` public input, 0 = ONE; ``< 0`` private)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    @property
    def is_input(self) -> bool:
        return self.index >= 0

    def __repr__(self) -> str:
        if self.index == ONE_INDEX:
            return "Variable(ONE)"
        return f"Variable(input {self.index})" if self.index > 0 else f"Variable(aux {-1 - self.index})"

    def __eq__(self, other):
        return isinstance(other, Variable) and other.index == self.index

    def __hash__(self):
        return hash(("var", self.index))

    # arithmetic promotes to a LinearCombination
    def lc(self) -> "LinearCombination":
        return LinearCombination({self.index: 1})

    def __add__(self, other):
        return self.lc() + other

    __radd__ = __add__

    def __sub__(self, other):
        return self.lc() - other

    def __rsub__(self, other):
        return LinearCombination.of(other) - self.lc()

    def __neg__(self):
        return -self.lc()

    def __mul__(self, k):
        return self.lc() * k

    __rmul__ = __mul__


ONE = Variable(ONE_INDEX)


class LinearCombination:
    """``sum coeff_i * z[var_i]``: a dict ``{encoded index: coeff}`` with canonical coefficients in ``[1, r)``.

    Supports ``+``, ``-`` with LCs / Variables / ints (ints mean multiples of ONE) and ``*`` by an int scalar.
    """

    __slots__ = ("terms",)

    def __init__(self, terms: dict | None = None):
        self.terms = terms if terms is not None else {}

    @staticmethod
    def of(x) -> "LinearCombination":
        """Coerce a LinearCombination, Variable, gadget value with ``.lc`` (e.g. ``Num``), int or term list."""
        if isinstance(x, LinearCombination):
            return x
        if isinstance(x, Variable):
            return LinearCombination({x.index: 1})
        if isinstance(x, bool):
            raise SynthesisError("a bool is not a linear combination (use 0/1 or a Boolean gadget)")
        if isinstance(x, (int, np.integer)):
            v = int(x) % R
            return LinearCombination({ONE_INDEX: v} if v else {})
        lc = getattr(x, "lc", None)
        if lc is not None:
            lc = lc() if callable(lc) else lc
            if isinstance(lc, LinearCombination):
                return lc
        if isinstance(x, (list, tuple)):
            out: dict = {}
            for item in x:
                try:
                    var, k = item
                except (TypeError, ValueError):
                    raise SynthesisError(f"term list entries must be (variable, coeff) pairs, got {item!r}") from None
                idx = var.index if isinstance(var, Variable) else var
                if not isinstance(idx, (int, np.integer)) or not isinstance(k, (int, np.integer)):
                    raise SynthesisError(f"bad term {item!r}: expected (Variable or int index, int coeff)")
                _acc(out, int(idx), int(k))
            return LinearCombination(out)
        raise SynthesisError(f"cannot use {type(x).__name__} as a linear combination")

    def copy(self) -> "LinearCombination":
        return LinearCombination(dict(self.terms))

    def __repr__(self) -> str:
        return f"LinearCombination({self.terms})"

    def __len__(self) -> int:
        return len(self.terms)

    def constant_value(self) -> int | None:
        """The value if this LC is a constant (only the ONE term), else None."""
        t = self.terms
        if not t:
            return 0
        if len(t) == 1 and ONE_INDEX in t:
            return t[ONE_INDEX]
        return None

    def __add__(self, other):
        o = LinearCombination.of(other)
        out = dict(self.terms)
        for k, v in o.terms.items():
            _acc(out, k, v)
        return LinearCombination(out)

    __radd__ = __add__

    def __sub__(self, other):
        o = LinearCombination.of(other)
        out = dict(self.terms)
        for k, v in o.terms.items():
            _acc(out, k, -v)
        return LinearCombination(out)

    def __rsub__(self, other):
        return LinearCombination.of(other) - self

    def __neg__(self):
        return LinearCombination({k: (-v) % R for k, v in self.terms.items()})

    def __mul__(self, k):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise SynthesisError("a linear combination can only be scaled by an int constant")
        k = int(k) % R
        if k == 0:
            return LinearCombination({})
        return LinearCombination({i: v * k % R for i, v in self.terms.items()})

    __rmul__ = __mul__


def _acc(d: dict, k: int, v: int) -> None:
    s = (d.get(k, 0) + v) % R
    if s:
        d[k] = s
    else:
        d.pop(k, None)


class _CoeffTable(dict):
    """coefficient (any int) -> id in the canonical table; new coefficients are interned on first use."""

    def __init__(self):
        super().__init__()
        self.values: list[int] = []
        self._canon: dict[int, int] = {}

    def __missing__(self, k):
        c = k % R
        i = self._canon.get(c)
        if i is None:
            i = len(self.values)
            self.values.append(c)
            self._canon[c] = i
        self[k] = i
        return i


# ---------------------------------------------------------------------------------------------------------------
# The constraint system
# ---------------------------------------------------------------------------------------------------------------


class ConstraintSystem:
    """Records constraints and/or witness values while a circuit is synthesized (see the module docstring).

    Public API: :meth:`alloc`, :meth:`alloc_input`, :meth:`enforce`, :meth:`namespace`, :meth:`value`,
    :meth:`to_r1cs`, :meth:`witness`, :meth:`check`. Properties ``num_inputs`` (incl. ONE), ``num_aux``,
    ``num_constraints``.

    Gadget API (the raw fast path of :mod:`cuzk_jax.circuits.gadgets`: encoded variable indices -- ``i >= 0`` input
    ``i``, ``-1 - j`` aux ``j`` -- no validation): :meth:`alloc_raw`, :meth:`enforce_raw`, :meth:`label_id`,
    :meth:`enforce_boolean_raw`, :meth:`enforce_xor_raw`, :meth:`value_raw`.
    """

    batched = False  # True for vector_witness.BatchCS (values are arrays over a batch of instances)

    def __init__(self, mode: str = "full"):
        if mode not in MODES:
            raise ValueError(f"unknown constraint-system mode {mode!r}; expected one of {MODES}")
        self.mode = mode
        self.keep = mode != "witness"  # record constraints
        self.has_values = mode != "structure"  # record witness values
        self.num_inputs = 1
        self.num_aux = 0
        self.num_constraints = 0
        self.input_values: list[int] | None = [1] if self.has_values else None
        self.aux_values: list[int] | None = [] if self.has_values else None
        self.input_names: list[str] = ["ONE"]
        self._coeffs = _CoeffTable()
        # ids of the coefficients the bit gadgets use (interned up front for the fast paths)
        self.ID_1 = self._coeffs[1]  # == 0
        self.ID_M1 = self._coeffs[-1]
        self.ID_2 = self._coeffs[2]
        # per matrix: columns (encoded indices), coefficient ids, CSR row pointers
        self._ca, self._cb, self._cc = array("q"), array("q"), array("q")
        self._ia, self._ib, self._ic = array("i"), array("i"), array("i")
        self._pa, self._pb, self._pc = array("q", [0]), array("q", [0]), array("q", [0])
        self._ns_stack: list[str] = []
        self._ns_paths: list[str] = [""]
        self._ns_index: dict[str, int] = {"": 0}
        self._ns_id = 0
        self._labels: list[str] = [""]
        self._label_index: dict[str, int] = {"": 0}
        self._row_name = array("q")  # (namespace id << 24) | label id, one per constraint

    def __repr__(self) -> str:
        return (f"ConstraintSystem(mode={self.mode!r}, inputs={self.num_inputs}, aux={self.num_aux}, "
                f"constraints={self.num_constraints})")

    # -- namespaces ----------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def namespace(self, name: str):
        """Scope constraint names: ``with cs.namespace("sha256"): ...`` (nested scopes join with ``/``)."""
        if not isinstance(name, str):
            raise SynthesisError(f"namespace name must be a str, got {type(name).__name__}")
        saved = self._ns_id
        self._ns_stack.append(name)
        path = "/".join(self._ns_stack)
        i = self._ns_index.get(path)
        if i is None:
            i = len(self._ns_paths)
            self._ns_paths.append(path)
            self._ns_index[path] = i
        self._ns_id = i
        try:
            yield self
        finally:
            self._ns_stack.pop()
            self._ns_id = saved

    @property
    def current_namespace(self) -> str:
        return self._ns_paths[self._ns_id]

    # -- allocation ------------------------------------------------------------------------------------------------
    def _resolve(self, value, name: str, kind: str) -> int | None:
        if not self.has_values:
            return None
        if callable(value):
            value = value()
        if value is None:
            where = f"{self.current_namespace}/{name}".strip("/") or "<unnamed>"
            raise SynthesisError(f"{kind} '{where}': missing witness value in {self.mode!r} mode")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise SynthesisError(f"{kind} '{name}': witness value must be an int, got {type(value).__name__}")
        return int(value) % R

    def alloc(self, value: int | Callable[[], int] | None = None, name: str = "") -> Variable:
        """A new private variable. ``value`` (int, or a zero-argument callable evaluated only when values are
        recorded) is reduced mod r; it is ignored in structure mode and required otherwise."""
        v = self._resolve(value, name, "alloc")
        return Variable(self.alloc_raw(v))

    def alloc_input(self, value: int | Callable[[], int] | None = None, name: str = "") -> Variable:
        """A new public input (its column is ``1 + (number of inputs allocated before it)``)."""
        v = self._resolve(value, name, "alloc_input")
        i = self.num_inputs
        self.num_inputs += 1
        if self.has_values:
            self.input_values.append(v)
        self.input_names.append(f"{self.current_namespace}/{name}".strip("/") or f"input_{i}")
        return Variable(i)

    def alloc_raw(self, value: int | None) -> int:
        """Gadget API: allocate a private variable, return its encoded index (``value``: trusted canonical, ignored
        in structure mode)."""
        j = self.num_aux
        self.num_aux = j + 1
        if self.has_values:
            self.aux_values.append(value)
        return -1 - j

    # -- constraints -----------------------------------------------------------------------------------------------
    def enforce(self, a, b, c, name: str = "") -> None:
        """Add the constraint ``a * b = c``; each side is a LinearCombination, Variable, int constant, gadget value
        with ``.lc`` or list of ``(Variable, coeff)`` pairs."""
        if not isinstance(name, str):
            raise SynthesisError(f"constraint name must be a str, got {type(name).__name__}")
        la, lb, lc = LinearCombination.of(a), LinearCombination.of(b), LinearCombination.of(c)
        self._check_indices(la, lb, lc)
        self.enforce_raw(list(la.terms.items()), list(lb.terms.items()), list(lc.terms.items()), name)

    def _check_indices(self, *lcs) -> None:
        for lc in lcs:
            for i in lc.terms:
                if i >= self.num_inputs or i < -self.num_aux:
                    raise SynthesisError(f"linear combination refers to a variable (encoded index {i}) that this "
                                         f"constraint system did not allocate")

    def label_id(self, label: str) -> int:
        """Gadget API: the interned id of constraint label ``label`` (for :meth:`enforce_boolean_raw` and
        :meth:`enforce_xor_raw`)."""
        li = self._label_index.get(label)
        if li is None:
            li = len(self._labels)
            if li >= 1 << 24:
                raise SynthesisError("too many distinct constraint labels (2^24)")
            self._labels.append(label)
            self._label_index[label] = li
        return li

    def enforce_raw(self, a, b, c, label: str = "") -> None:
        """Gadget API: the constraint ``a * b = c``, each side a sequence of ``(encoded index, int coeff)`` pairs
        (coefficients any ints, indices not checked); ``label`` names it within the current namespace."""
        self.num_constraints += 1
        if not self.keep:
            return
        cm = self._coeffs
        if a:
            self._ca.extend([t[0] for t in a])
            self._ia.extend([cm[t[1]] for t in a])
        self._pa.append(len(self._ca))
        if b:
            self._cb.extend([t[0] for t in b])
            self._ib.extend([cm[t[1]] for t in b])
        self._pb.append(len(self._cb))
        if c:
            self._cc.extend([t[0] for t in c])
            self._ic.extend([cm[t[1]] for t in c])
        self._pc.append(len(self._cc))
        li = self._label_index.get(label)
        if li is None:
            li = self.label_id(label)
        self._row_name.append((self._ns_id << 24) | li)

    def enforce_boolean_raw(self, v: int, li: int) -> None:
        """Gadget API: the constraint ``v * (1 - v) = 0`` on encoded index ``v`` (``li``: a :meth:`label_id`);
        records unconditionally, so the caller checks ``self.keep``."""
        self.num_constraints += 1
        self._ca.append(v)
        self._ia.append(0)
        self._pa.append(len(self._ca))
        self._cb.extend((0, v))
        self._ib.extend((0, self.ID_M1))
        self._pb.append(len(self._cb))
        self._pc.append(len(self._cc))
        self._row_name.append((self._ns_id << 24) | li)

    def enforce_xor_raw(self, x: int, y: int, z: int, li: int) -> None:
        """Gadget API: the constraint ``(2x) * y = x + y - z`` on encoded indices (``li``: a :meth:`label_id`);
        records unconditionally, so the caller checks ``self.keep``."""
        self.num_constraints += 1
        self._ca.append(x)
        self._ia.append(self.ID_2)
        self._pa.append(len(self._ca))
        self._cb.append(y)
        self._ib.append(0)
        self._pb.append(len(self._cb))
        self._cc.extend((x, y, z))
        self._ic.extend((0, 0, self.ID_M1))
        self._pc.append(len(self._cc))
        self._row_name.append((self._ns_id << 24) | li)

    # -- values ------------------------------------------------------------------------------------------------------
    def value_raw(self, idx: int) -> int:
        """Gadget API: the recorded value of encoded index ``idx`` (witness or full mode; not checked)."""
        return self.input_values[idx] if idx >= 0 else self.aux_values[-1 - idx]

    def value(self, x) -> int:
        """Witness value of a Variable / LinearCombination / ``.lc`` gadget value (witness or full mode)."""
        if not self.has_values:
            raise SynthesisError("values are not recorded in structure mode")
        if isinstance(x, Variable):
            return self.value_raw(x.index)
        lc = LinearCombination.of(x)
        return sum(k * self.value_raw(i) for i, k in lc.terms.items()) % R

    # -- outputs -----------------------------------------------------------------------------------------------------
    def constraint_name(self, i: int) -> str:
        ns = self._ns_paths[self._row_name[i] >> 24]
        label = self._labels[self._row_name[i] & 0xFFFFFF]
        return f"{ns}/{label}" if ns and label else (ns or label or "<unnamed>")

    def to_r1cs(self):
        """The recorded constraints as an :class:`~cuzk_jax.circuits.r1cs.R1CS` (structure or full mode)."""
        if not self.keep:
            raise SynthesisError("to_r1cs: constraints are not recorded in 'witness' mode")
        def arr(buf, dtype):
            return np.frombuffer(buf, dtype=dtype).copy() if len(buf) else np.zeros(0, dtype)

        mats = []
        for cols_buf, ids_buf, ptr_buf in ((self._ca, self._ia, self._pa), (self._cb, self._ib, self._pb),
                                           (self._cc, self._ic, self._pc)):
            enc = arr(cols_buf, np.int64)
            cols = np.where(enc >= 0, enc, self.num_inputs - 1 - enc).astype(np.int32)
            mats.append(SparseMatrix(indptr=arr(ptr_buf, np.int64), cols=cols, coeff_ids=arr(ids_buf, np.int32)))
        names = arr(self._row_name, np.int64)
        return R1CS(
            num_inputs=self.num_inputs,
            num_aux=self.num_aux,
            A=mats[0], B=mats[1], C=mats[2],
            coeffs=tuple(self._coeffs.values),
            namespaces=tuple(self._ns_paths),
            labels=tuple(self._labels),
            row_namespace=(names >> 24).astype(np.int32),
            row_label=(names & 0xFFFFFF).astype(np.int32),
            input_names=tuple(self.input_names),
        )

    def witness(self):
        """The assignment as a :class:`~cuzk_jax.circuits.r1cs.Witness` (witness or full mode)."""
        if not self.has_values:
            raise SynthesisError("witness: values are not recorded in 'structure' mode")
        return Witness(inputs=list(self.input_values), aux=list(self.aux_values), num_constraints=self.num_constraints)

    def check(self) -> None:
        """Full mode: raise :class:`Unsatisfied` naming the first constraint the values violate."""
        if self.mode != "full":
            raise SynthesisError("check() needs mode='full' (constraints and values)")
        self.to_r1cs().check(self.witness())


"""The project's error classes, in one module of the base layer (imports nothing from the project).

Every class derives from :class:`CuzkError`; the input errors also derive from ``ValueError`` so callers that catch
``ValueError`` keep working. ``exit_code`` is the status the scripts end with (one ``error: ...`` line on stderr,
no traceback; :mod:`cuzk_jax.cli`):

* 0 -- ok;
* 1 -- a proof did not verify (:class:`ProofRejected`; ``verify`` functions themselves return a bool);
* 2 -- bad usage or input (:class:`BadInput` and its subclasses, :class:`ToolchainMissing`).

=======================  ====  ===================================================================================
class                    exit  meaning
=======================  ====  ===================================================================================
``CuzkError``            2     root of every project error
``BadInput``             2     an argument or input value the library cannot use (also a ``ValueError``)
``SynthesisError``       2     a circuit synthesized with bad input: missing witness value, wrong type or mode
``Unsatisfied``          2     a witness violates the R1CS; names the first failing constraint (and partition)
``FormatError``          2     a file cannot be used: truncated, corrupt, wrong magic, or for another curve
``KeyFormatError``       2     a cuzk_jax key file is truncated, corrupt or holds an invalid point
``MemoryBudgetError``    2     a device / host memory budget cannot hold even one partition (before any work)
``DeviceMemoryError``    2     the device ran out of memory while proving (the plan's estimate was exceeded)
``ToolchainMissing``     2     node / the pinned npm packages are absent (tests skip on it; also a RuntimeError)
``ProofRejected``        1     a proof did not verify where the caller required it to
=======================  ====  ===================================================================================

Old import locations re-export these (``cuzk_jax.circuits.cs.Unsatisfied``, ``cuzk_jax.snarkjs.binfile.FormatError``,
``cuzk_jax.snarkjs.toolchain.ToolchainMissing``), so the class is the same object under both names.
"""

from __future__ import annotations

__all__ = ["CuzkError", "BadInput", "SynthesisError", "Unsatisfied", "FormatError", "KeyFormatError",
           "ToolchainMissing", "ProofRejected", "MemoryBudgetError",
           "DeviceMemoryError"]


class CuzkError(Exception):
    """Root of the project's errors."""

    exit_code = 2


class BadInput(CuzkError, ValueError):
    """An argument or input value the library cannot use (unknown circuit or preset, wrong shape, bad value)."""


class SynthesisError(BadInput):
    """A circuit was synthesized with bad input (missing witness value, wrong type, wrong mode)."""


class Unsatisfied(BadInput):
    """A witness does not satisfy the R1CS; ``index`` and ``name`` identify the first failing constraint, and
    ``partition`` the batch element when several were checked at once."""

    def __init__(self, index: int, name: str, partition: int | None = None, detail: str = ""):
        self.index = index
        self.name = name
        self.partition = partition
        where = f"partition {partition}: " if partition is not None else ""
        super().__init__(f"{where}constraint #{index} '{name}' is not satisfied{detail}")


class FormatError(BadInput):
    """A file cuzk_jax cannot use: truncated, corrupt, bad magic, or for another curve (circom / snarkjs files)."""


class KeyFormatError(FormatError):
    """A cuzk_jax key file is truncated, corrupt, or holds an invalid point."""


class MemoryBudgetError(BadInput):
    """A device or host memory budget cannot hold what was asked (raised by the memory plan before any work)."""


class DeviceMemoryError(CuzkError, MemoryError):
    """The device ran out of memory during a proving phase although the memory plan admitted the batch (the
    allocator's fragmentation or a temporary the plan's formulas do not model); names the phase, the failed
    allocation and the plan's estimate. A lower ``device_budget`` makes the plan stream more and batch less."""


class ToolchainMissing(CuzkError, RuntimeError):
    """node / the pinned npm packages (snarkjs, circom2, circomlib) are not installed (tests skip on this)."""


class ProofRejected(CuzkError):
    """A proof did not verify where the caller required it to."""

    exit_code = 1


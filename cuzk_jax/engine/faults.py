"""Fault injection for the engine's reliability tests and ``bench --op=soak`` (no JAX: synthesis workers import it).

:class:`FaultyCube` is the ``cube`` circuit (the same R1CS, so the same key and the same batches) whose inputs may
carry a ``"fault"`` entry, acted on during witness synthesis -- in the synthesis worker:

* ``("exit_once", marker_path)`` -- the worker process exits at once (``os._exit``, as if the OOM killer had
  killed it) the first time; ``marker_path`` is created atomically (``O_CREAT | O_EXCL``) to remember it, so the
  retried partition synthesizes normally;
* ``("exit", None)`` -- the worker exits every time (the engine retries once, then fails the job);
* ``("raise", message)`` -- synthesis raises ``RuntimeError(message)``.

An exit is only ever taken in a worker *process*; under thread synthesis (the caller's process) it raises instead.

:class:`FaultySpans` is ``porep_like`` with the same directives, acted on only by the span tasks after the first
of a partition the engine splits over several workers (``witness_span`` with ``lo > 0``): the unsplit path ignores
them, so a partition retried alone (as the engine retries after a worker died) synthesizes normally.
"""

from __future__ import annotations

import multiprocessing
import os

from cuzk_jax.circuits.cube import Cube
from cuzk_jax.circuits.porep_like import PorepLike

FAULTS = ("exit_once", "exit", "raise")


def _in_worker_process() -> bool:
    return multiprocessing.parent_process() is not None


def _exit_worker(what: str) -> None:
    if not _in_worker_process():
        raise RuntimeError(f"fault injection: {what} (not taken: synthesis runs in the caller's process)")
    os._exit(1)


def inject(fault) -> None:
    """Act on one fault directive (see the module docstring)."""
    kind, arg = fault
    if kind == "exit_once":
        try:
            fd = os.open(arg, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return  # already taken once
        os.close(fd)
        _exit_worker("exit_once")
    elif kind == "exit":
        _exit_worker("exit")
    elif kind == "raise":
        raise RuntimeError(arg)
    else:
        raise ValueError(f"unknown fault {kind!r}; expected one of {FAULTS}")


class FaultyCube(Cube):
    """``cube`` with fault injection through ``inputs["fault"]`` (see the module docstring)."""

    name = "faulty_cube"

    def synthesize(self, cs, inputs=None):
        if inputs is not None and inputs.get("fault"):
            inject(inputs["fault"])
        super().synthesize(cs, inputs)


class FaultySpans(PorepLike):
    """``porep_like`` with fault injection in a split partition's later spans (see the module docstring)."""

    name = "faulty_spans"

    def witness_span(self, inputs, lo: int, hi: int, out: str) -> dict:
        if lo > 0 and inputs.get("fault"):
            inject(inputs["fault"])
        return super().witness_span(inputs, lo, hi, out)

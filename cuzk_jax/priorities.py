"""Priority classes of proof jobs, in cuzk's order (base layer: plain data, imports nothing from the project).

Filecoin storage providers prove four kinds of things with very different deadlines (cuzk schedules them so):

=================  ====  ==========================================================================================
class              rank  why
=================  ====  ==========================================================================================
``winning_post``   0     a WinningPoSt proof must be in a block within the block time: latency-critical
``window_post``    1     WindowPoSt proofs have a deadline window (30 minutes per deadline)
``porep``          2     PoRep C2 sector proofs: bulk work
``snap_deals``     3     SnapDeals (EmptySectorUpdate) proofs: bulk work
=================  ====  ==========================================================================================

A lower rank is more urgent. A circuit class says its class with the attribute ``PRIORITY_CLASS`` (default
``porep``, see :func:`class_of`); the engine and the service take the most urgent ready work at each batch
boundary, and their own configuration may reorder or weight the classes.
"""

from __future__ import annotations

__all__ = ["CLASSES", "DEFAULT", "rank", "class_of", "check"]

#: The classes, most urgent first (cuzk's order).
CLASSES: tuple[str, ...] = ("winning_post", "window_post", "porep", "snap_deals")
DEFAULT = "porep"


def check(name: str) -> str:
    """``name`` if it is a known class, else ``ValueError`` naming the known ones (callers wrap it in their error)."""
    if name not in CLASSES:
        raise ValueError(f"unknown priority class {name!r}; expected one of {', '.join(CLASSES)}")
    return name


def rank(name: str, order: tuple[str, ...] = CLASSES) -> int:
    """Position of ``name`` in ``order`` (0 = most urgent)."""
    check(name)
    return order.index(name)


def class_of(circuit) -> str:
    """The priority class a circuit (class or instance) declares with ``PRIORITY_CLASS``; ``porep`` if none."""
    return check(getattr(circuit, "PRIORITY_CLASS", DEFAULT))

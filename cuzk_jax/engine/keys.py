"""Resident proving keys: loaded once per circuit, kept on the device, evicted least-recently-used by bytes.

cuzk's SRS manager: a proving key (hundreds of MiB to GiB for real circuits) is read and uploaded once and then
serves every proof of its circuit; reloading it per proof would cost more than proving. :class:`KeyManager` maps a
circuit's R1CS digest to a *resident* entry -- whatever the backend's ``place(pk, r1cs)`` returns (for the device
backend: the key's queries and the R1CS evaluator tables on the device, replicated over the mesh) -- with

* ``get(circuit_id, circuit, r1cs)``: the resident entry, loading it through the ``loader`` on a miss;
* ``preload``: the same, ahead of the first job; ``put``: install a key you already have;
* ``evict`` / ``clear``: drop entries (device memory is released when the last in-flight batch that uses the key
  finishes -- batches hold their own reference, so an eviction never breaks running work);
* an LRU limit ``budget_bytes`` on the sum of resident bytes (per device: a replicated key costs its size on every
  device). A single key larger than the budget is still admitted (alone) -- refusing it would make its jobs fail
  forever -- and the overrun is logged.

Thread-safe; a key being loaded is loaded once even if several threads ask for it.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)


@dataclasses.dataclass
class KeyStats:
    loads: int = 0
    hits: int = 0
    evictions: int = 0
    load_seconds: float = 0.0

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class KeyManager:
    """LRU cache of resident keys keyed by R1CS digest (see the module docstring).

    ``loader(circuit, r1cs) -> ProvingKey`` produces a key on a miss (e.g. ``keycache.load_or_setup``); ``place(pk,
    r1cs, headroom) -> resident`` puts it where the backend needs it -- ``headroom`` is the budget less the bytes
    the other resident keys hold (``None`` without a budget), so the backend can decide whether derived data such
    as precomputed window tables fit -- and ``size(resident) -> int`` gives all its bytes (tables included).
    """

    def __init__(self, place: Callable, size: Callable, loader: Callable | None = None,
                 budget_bytes: int | None = None):
        if budget_bytes is not None and (not isinstance(budget_bytes, int) or budget_bytes <= 0):
            raise ValueError(f"key budget must be a positive number of bytes or None, got {budget_bytes!r}")
        self._place, self._size, self.loader = place, size, loader
        self.budget_bytes = budget_bytes
        self._entries: collections.OrderedDict[str, tuple[object, int]] = collections.OrderedDict()
        self._loading: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.stats = KeyStats()

    # -- queries -----------------------------------------------------------------------------------------------------
    def resident(self) -> dict[str, int]:
        """``{digest: bytes}`` of the resident keys, least recently used first."""
        with self._lock:
            return {k: n for k, (_, n) in self._entries.items()}

    def resident_bytes(self) -> int:
        with self._lock:
            return sum(n for _, n in self._entries.values())

    def __contains__(self, digest: str) -> bool:
        with self._lock:
            return digest in self._entries

    # -- loading -----------------------------------------------------------------------------------------------------
    def put(self, pk, r1cs, digest: str | None = None) -> object:
        """Make ``pk`` (a :class:`~cuzk_jax.groth16.data_structures.ProvingKey` for ``r1cs``, whose digest may be
        passed to save recomputing it) resident."""
        digest = digest or r1cs.digest()
        if pk.circuit_digest != digest:
            raise ValueError("proving key was generated for a different circuit (R1CS digest mismatch)")
        resident = self._place(pk, r1cs, self._headroom(digest))
        self._insert(digest, resident)
        return resident

    def adopt(self, resident, digest: str) -> object:
        """Make an already placed key (what ``place`` returns) resident for ``digest``; ValueError when its proving
        key was made for another circuit."""
        made_for = getattr(resident, "digest", None) or getattr(getattr(resident, "pk", None), "circuit_digest", None)
        if made_for is not None and made_for != digest:
            raise ValueError("resident key was made for a different circuit (R1CS digest mismatch)")
        self._insert(digest, resident)
        return resident

    def get(self, digest: str, circuit=None, r1cs=None):
        """The resident entry for ``digest``, loading it (``loader(circuit, r1cs)``) if absent; marks it MRU."""
        while True:
            with self._lock:
                if digest in self._entries:
                    self._entries.move_to_end(digest)
                    self.stats.hits += 1
                    return self._entries[digest][0]
                ev = self._loading.get(digest)
                if ev is None:
                    ev = self._loading[digest] = threading.Event()
                    break
            ev.wait()  # another thread is loading this key; then look again
        try:
            if self.loader is None or circuit is None:
                raise KeyError(f"no proving key resident for circuit {getattr(circuit, 'name', '?')} "
                               f"(digest {digest[:16]}) and no key loader: pass key_loader= or preload the key")
            t0 = time.perf_counter()
            pk = self.loader(circuit, r1cs)
            if pk.circuit_digest != digest:
                raise ValueError(f"key loader returned a key for another circuit (digest {pk.circuit_digest[:16]}, "
                                 f"expected {digest[:16]})")
            resident = self._place(pk, r1cs, self._headroom(digest))
            dt = time.perf_counter() - t0
            with self._lock:
                self.stats.loads += 1
                self.stats.load_seconds += dt
            self._insert(digest, resident)
            log.info("key manager: loaded %s in %.2fs", digest[:16], dt)
            return resident
        finally:
            with self._lock:
                self._loading.pop(digest, None)
            ev.set()

    def _headroom(self, digest: str) -> int | None:
        """Budget bytes left for the key ``digest`` beside the other resident keys (None: no budget)."""
        if self.budget_bytes is None:
            return None
        with self._lock:
            return max(0, self.budget_bytes - sum(n for d, (_, n) in self._entries.items() if d != digest))

    def _insert(self, digest: str, resident) -> None:
        nbytes = int(self._size(resident))
        with self._lock:
            self._entries.pop(digest, None)
            self._entries[digest] = (resident, nbytes)
            self._enforce_budget(keep=digest)

    def _enforce_budget(self, keep: str) -> None:
        if self.budget_bytes is None:
            return
        total = sum(n for _, n in self._entries.values())
        while total > self.budget_bytes and len(self._entries) > 1:
            victim = next(iter(self._entries))
            if victim == keep:  # never the key just requested (it is MRU, so this only happens when alone)
                break
            _, n = self._entries.pop(victim)
            total -= n
            self.stats.evictions += 1
            log.info("key manager: evicted %s (%d bytes) to fit the %d-byte budget", victim[:16], n, self.budget_bytes)
        if total > self.budget_bytes:
            log.warning("key manager: key %s alone (%d bytes) exceeds the budget of %d bytes", keep[:16], total,
                        self.budget_bytes)

    # -- eviction ----------------------------------------------------------------------------------------------------
    def evict(self, digest: str) -> bool:
        """Drop one key; True if it was resident."""
        with self._lock:
            if self._entries.pop(digest, None) is None:
                return False
            self.stats.evictions += 1
            return True

    def clear(self) -> None:
        with self._lock:
            self.stats.evictions += len(self._entries)
            self._entries.clear()

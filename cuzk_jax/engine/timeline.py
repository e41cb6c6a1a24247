"""Timeline of an engine run: what each synthesis worker, the collector, the device and the finisher did when.

Events are ``(lane, name, start, end, batch, job)`` with times in seconds since the engine started
(``time.perf_counter``). :func:`plot` draws them as a Gantt chart (one row per lane, one colour per phase) with
matplotlib, imported lazily (optional extra ``cuzk_jax[plot]``).
"""

from __future__ import annotations

import collections
import dataclasses
import threading

PHASE_COLORS = {
    "synthesis": "#4c72b0", "stage": "#8c8c8c", "evaluate": "#dd8452", "h": "#55a868", "msm_a": "#c44e52",
    "msm_b1": "#8172b3", "msm_b2": "#937860", "msm_l": "#da8bc3", "msm_h": "#ccb974", "msm": "#c44e52",
    "device": "#c44e52", "fetch": "#64b5cd", "finish": "#2ca02c",
}


@dataclasses.dataclass(frozen=True)
class Event:
    lane: str
    name: str
    start: float
    end: float
    batch: int | None = None
    job: int | None = None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class Timeline:
    """A bounded, thread-safe event log (the oldest events are dropped beyond ``limit``)."""

    def __init__(self, t0: float, limit: int = 200_000, enabled: bool = True):
        self.t0 = t0
        self.enabled = enabled
        self._events: collections.deque[Event] = collections.deque(maxlen=limit)
        self._lock = threading.Lock()

    def add(self, lane: str, name: str, start: float, end: float, batch: int | None = None,
            job: int | None = None) -> None:
        """Record an event; ``start``/``end`` are absolute ``perf_counter`` times."""
        if self.enabled:
            with self._lock:
                self._events.append(Event(lane, name, start - self.t0, end - self.t0, batch, job))

    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)


def _lane_order(lanes) -> list[str]:
    def key(lane):
        rank = {"collector": 1, "device": 2, "finish": 3}.get(lane, 0)
        return (rank, lane)

    return sorted(set(lanes), key=key)


def plot(panels, path: str, title: str = "") -> str:
    """Draw one Gantt panel per ``(label, events)`` in ``panels`` (a shared time axis) into ``path`` (PNG).

    ``events`` are :class:`Event` objects or their dicts. Returns ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display on the benchmark machines
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    panels = [(label, [e if isinstance(e, Event) else Event(**e) for e in evs]) for label, evs in panels]
    t_max = max([e.end for _, evs in panels for e in evs] + [1e-3])
    heights = [max(2, len({e.lane for e in evs})) for _, evs in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 1.0 + 0.38 * sum(heights) + 0.6 * len(panels)),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
    used = set()
    for ax, (label, evs) in zip(axes[:, 0], panels):
        lanes = _lane_order(e.lane for e in evs)
        row = {lane: i for i, lane in enumerate(lanes)}
        for e in evs:
            color = PHASE_COLORS.get(e.name, "#7f7f7f")
            used.add(e.name)
            ax.barh(row[e.lane], max(e.end - e.start, t_max * 1.5e-3), left=e.start, height=0.7, color=color,
                    edgecolor="black", linewidth=0.2)
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels(lanes, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(label, fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlim(0, t_max * 1.01)
    axes[-1, 0].set_xlabel("seconds")
    handles = [Patch(color=PHASE_COLORS.get(n, "#7f7f7f"), label=n) for n in PHASE_COLORS if n in used]
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=min(6, max(1, len(handles))))
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""The console's timeline chart: a PNG drawn by matplotlib (object API, Agg canvas: no pyplot global
state, safe in a worker thread).

One axes, one lane per memory type; in each lane the memories created per time bin, stacked by status
and scaled to the lane (its label gives the largest bin). One filled step polygon collection per
(type, status): a few dozen artists whatever the memory count, where one marker per memory cost
~0.3-1 s at 10,000 memories. Profiled on 2 busy cores, the rest of the cost is matplotlib's tick
machinery (~0.1 s per axes), hence one axes, not one per type; ``fill_between`` rather than
``stairs``, whose patches make matplotlib walk every path segment to update the data limits; fixed
margins rather than ``tight_layout``, which draws the figure a second time to measure it.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from services.gateway.console.data import STATUSES, Timeline

STATUS_COLORS = {
    "active": "#2a7ae2",
    "superseded": "#f0a202",
    "expired": "#9e9e9e",
    "quarantined": "#d7263d",
    "merged": "#7b2cbf",
}
WIDTH_IN, HEIGHT_IN, DPI = 11.0, 2.8, 90
"""Figure size (inches) and dots per inch: 990 x 252 pixels."""
LANE = 0.85
"""Height of a lane's tallest bin (lanes are one unit apart)."""


def size_px() -> tuple[int, int]:
    """``(width, height)`` of the chart in pixels."""
    return round(WIDTH_IN * DPI), round(HEIGHT_IN * DPI)


def timeline_png(timeline: Timeline, title: str) -> bytes:
    """PNG bytes of ``timeline``: x ``created_at`` (UTC dates), one lane per type, memories per bin
    stacked by status (legend: status and count; lane label: type and its largest bin)."""
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    types = timeline.types()
    edges = timeline.edges / 86_400.0  # matplotlib date numbers: days since 1970-01-01 (UTC)
    statuses = [s for s in STATUSES if any(k[1] == s for k in timeline.series)]
    statuses += sorted({s for _, s in timeline.series} - set(statuses))
    totals = {s: sum(int(v.sum()) for k, v in timeline.series.items() if k[1] == s) for s in statuses}
    labels = []
    for lane, memory_type in enumerate(types):
        present = [s for s in statuses if (memory_type, s) in timeline.series]
        stacked = [(s, timeline.series[(memory_type, s)]) for s in present]
        peak = max(float(np.sum([c for _, c in stacked], axis=0).max()), 1.0)
        base = np.zeros(len(edges) - 1, dtype=np.float64)
        for status, counts in stacked:
            top = base + counts
            low, high = (lane + LANE * np.append(v, v[-1]) / peak for v in (base, top))
            ax.fill_between(
                edges, low, high, step="post", linewidth=0, color=STATUS_COLORS.get(status, "black"),
                label=f"{status} ({totals[status]})",
            )  # fmt: skip
            base = top
        labels.append(f"{memory_type}\n(max {int(peak)}/bin)")
    days = (edges[-1] - edges[0]) / max(len(edges) - 1, 1)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(-0.1, max(len(types), 1) - 0.05)
    ax.set_yticks([i + LANE / 2 for i in range(len(types))], labels, fontsize=7)
    ax.xaxis_date(tz="UTC")
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    first = {str(c.get_label()): c for c in reversed(ax.collections)}  # one entry per status
    if first:
        names = sorted(first, key=lambda n: statuses.index(n.rsplit(" (", 1)[0]))
        ax.legend([first[n] for n in names], names, loc="upper left", bbox_to_anchor=(0, 1.16), fontsize=7,
                  ncol=5, frameon=False)  # fmt: skip
    ax.set_title(f"{title}; bins of {days:.3g} days", fontsize=9, loc="right")
    fig.subplots_adjust(left=0.1, right=0.99, top=0.86, bottom=0.13)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()

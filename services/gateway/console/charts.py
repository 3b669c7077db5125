"""The console's timeline chart: a PNG drawn by matplotlib (object API, Agg canvas: no pyplot global
state, safe in a worker thread). One lane per memory type, one dot per memory at its ``created_at``,
coloured by status (line markers, not a scatter collection: several times faster for 10,000 dots)."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from services.gateway.console.data import Timeline

TYPES = ("working", "episodic", "semantic")
STATUS_COLORS = {
    "active": "#2a7ae2",
    "superseded": "#f0a202",
    "expired": "#9e9e9e",
    "quarantined": "#d7263d",
    "merged": "#7b2cbf",
}


def timeline_png(timeline: Timeline, title: str) -> bytes:
    """PNG bytes of ``timeline`` (x: ``created_at``, one lane per type, one colour per status)."""
    fig = Figure(figsize=(11, 2.8), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    lanes = {t: i for i, t in enumerate(TYPES)}
    for t in sorted(set(timeline.types) - set(lanes)):
        lanes[t] = len(lanes)
    if len(timeline):
        rng = np.random.default_rng(0)  # deterministic jitter
        days = timeline.created / 86_400.0  # matplotlib date numbers: days since 1970-01-01 (UTC)
        ys = np.fromiter((lanes[t] for t in timeline.types), dtype=np.float64, count=len(timeline))
        ys += rng.uniform(-0.3, 0.3, len(timeline))
        statuses = np.asarray(timeline.statuses)
        for status in sorted(set(timeline.statuses)):
            mask = statuses == status
            ax.plot(
                days[mask], ys[mask], linestyle="none", marker="o", markersize=2.2, alpha=0.6,
                color=STATUS_COLORS.get(status, "black"), label=f"{status} ({int(mask.sum())})",
            )  # fmt: skip
        ax.xaxis_date(tz="UTC")
        ax.legend(loc="upper left", fontsize=7, ncol=5, markerscale=2)
    ax.set_yticks(list(lanes.values()), list(lanes))
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()

"""The console's timeline chart: a PNG drawn by matplotlib (object API, Agg canvas: no pyplot global
state, safe in a worker thread). One lane per memory type, one dot per memory at its ``created_at``,
coloured by status; a few thousand dots draw in tens of milliseconds."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from services.gateway.console.data import TimelinePoint

TYPES = ("working", "episodic", "semantic")
STATUS_COLORS = {
    "active": "#2a7ae2",
    "superseded": "#f0a202",
    "expired": "#9e9e9e",
    "quarantined": "#d7263d",
    "merged": "#7b2cbf",
}


def timeline_png(points: list[TimelinePoint], title: str) -> bytes:
    """PNG bytes of the timeline of ``points`` (any order)."""
    fig = Figure(figsize=(11, 2.8), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    lanes = {t: i for i, t in enumerate(TYPES)}
    for t in sorted({p.type for p in points} - set(lanes)):
        lanes[t] = len(lanes)
    rng = np.random.default_rng(0)  # deterministic jitter
    if points:
        xs = np.array([p.created_ts for p in points], dtype=np.float64)
        ys = np.array([lanes[p.type] for p in points], dtype=np.float64) + rng.uniform(-0.3, 0.3, len(points))
        statuses = np.array([p.status for p in points])
        for status in sorted(set(statuses.tolist())):
            mask = statuses == status
            dates = (xs[mask] * 1000.0).astype("int64").astype("datetime64[ms]")  # UTC epoch ms
            ax.scatter(
                dates, ys[mask], s=6, alpha=0.6, color=STATUS_COLORS.get(status, "black"),
                label=f"{status} ({int(mask.sum())})", linewidths=0,
            )  # fmt: skip
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

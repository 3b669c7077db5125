"""PNG plots of a tuning run (matplotlib, Agg backend: no display needed).

:func:`write_plots` writes, into one folder:

- ``floor.png``: precision and recall of used memories against the similarity floor, the fitted and
  the current floor;
- ``decay.png``: the empirical reuse hazard by days since the last use, per memory type, with the
  fitted exponential and its half-life;
- ``usage_by_age.png``: share of returned memories the agent used, by age at recall and type;
- ``scores.png``: similarity and final-score distributions of used vs unused returned memories;
- ``expiry.png``: share of memories / never-used memories expired and worst regret per threshold;
- ``keep.png``: importance of stored vs used memories with the keep thresholds;
- ``tuning.png``: all six on one page (what the README and the console show).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.tuning.fit import DecayFit, ExpiryFit, FloorFit, KeepFit, NotFitted

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from hindsight.tuning.run import TuneReport

PLOTS = ("floor", "decay", "usage_by_age", "scores", "expiry", "keep")
_COLORS = {"all": "black", "episodic": "tab:blue", "semantic": "tab:orange", "working": "tab:green"}


def _tuned(value: float, validated: bool) -> str:
    return f"tuned {value:.3f}" if validated else f"fitted {value:.3f}, not applied"


def _not_fitted(ax: Axes, title: str, fit: NotFitted | None = None) -> None:
    ax.set_title(title)
    ax.text(
        0.5,
        0.5,
        "not fitted" + (f":\n{fit.reason}" if fit is not None else ""),
        ha="center",
        va="center",
        wrap=True,
        fontsize=8,
        transform=ax.transAxes,
    )
    ax.set_axis_off()


def _floor(ax: Axes, report: TuneReport) -> None:
    f = report.floor
    if not isinstance(f, FloorFit):
        _not_fitted(ax, "similarity floor", f)
        return
    ax.plot(f.thresholds, f.recall_curve, label="recall of used", color="tab:blue")
    ax.plot(f.thresholds, f.precision_curve, label="precision", color="tab:orange")
    ax.axvspan(f.ci95[0], f.ci95[1], color="tab:green", alpha=0.15, label="95% CI")
    ax.axvline(
        f.floor, color="tab:green", linestyle="-" if f.validated else ":", label=_tuned(f.floor, f.validated)
    )
    ax.axvline(f.current, color="grey", linestyle="--", label=f"current {f.current:.3f}")
    ax.axhline(f.target_recall, color="tab:blue", linestyle=":", linewidth=0.8)
    lo = max(float(f.thresholds.min()), min(f.floor, f.current) - 0.1)
    ax.set_xlim(lo, float(f.thresholds.max()) + 0.01)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("similarity floor (cosine)")
    ax.set_title(f"similarity floor: {f.positives} used / {f.negatives} unused")
    ax.legend(fontsize=7, loc="lower left")


def _decay(ax: Axes, report: TuneReport, max_days: float = 120.0) -> None:
    fits = {g: d for g, d in report.decay.items() if isinstance(d, DecayFit)}
    if not fits:
        first = next(iter(report.decay.values()), None)
        _not_fitted(ax, "reuse decay", first if isinstance(first, NotFitted) else None)
        return
    for group, d in fits.items():
        h = d.hazard
        keep = (h.exposure > 0) & (h.starts < max_days)
        color = _COLORS.get(group)
        mids = h.starts[keep] + h.width / 2
        sizes = 4 + 60 * h.exposure[keep] / max(float(h.exposure[keep].max()), 1.0)
        ax.scatter(mids, h.rate[keep], s=sizes, alpha=0.35, color=color)
        t = np.linspace(0, min(max_days, float(mids.max()) if mids.size else max_days), 200)
        ax.plot(
            t,
            np.exp(d.intercept - d.rate_per_day * t),
            color=color,
            label=f"{group}: half-life {d.half_life_days:.1f} d",
        )
    ax.set_yscale("log")
    ax.set_xlabel("days since last use")
    ax.set_ylabel("uses per memory-day")
    ax.set_title("reuse hazard (dots: data, lines: fit)")
    ax.legend(fontsize=7)


def _usage(ax: Axes, report: TuneReport) -> None:
    rows = report.usage_by_age
    if not rows:
        _not_fitted(ax, "usage by age")
        return
    labels = list(dict.fromkeys(r["age_days"] for r in rows))
    types = sorted({r["memory_type"] for r in rows})
    width = 0.8 / max(1, len(types))
    for k, ty in enumerate(types):
        rate = {r["age_days"]: r["used_rate"] for r in rows if r["memory_type"] == ty}
        xs = np.arange(len(labels)) + k * width
        ax.bar(xs, [rate.get(lab, 0.0) for lab in labels], width, label=ty, color=_COLORS.get(ty))
    ax.set_xticks(np.arange(len(labels)) + width * (len(types) - 1) / 2, labels, fontsize=7)
    ax.set_xlabel("age at recall (days)")
    ax.set_ylabel("share used")
    ax.set_title("usage of returned memories by age and type")
    ax.legend(fontsize=7)


def _scores(ax: Axes, report: TuneReport) -> None:
    sim = report.scores.get("similarity", {})
    if not sim.get("bin"):
        _not_fitted(ax, "score distributions")
        return
    bins = np.asarray(sim["bin"])
    for key, color in (("used", "tab:green"), ("unused", "tab:red")):
        values = np.asarray(sim[key], dtype=np.float64)
        total = values.sum()
        if total > 0:
            ax.step(bins, values / total, where="post", color=color, label=f"{key} (n={int(total)})")
    final = report.scores.get("final_score", {})
    if final.get("bin"):
        fb = np.asarray(final["bin"])
        for key, color in (("used", "tab:green"), ("unused", "tab:red")):
            values = np.asarray(final[key], dtype=np.float64)
            if values.sum() > 0:
                ax.step(fb, values / values.sum(), where="post", color=color, linestyle=":", alpha=0.7)
    ax.set_xlabel("similarity (solid) / final score (dotted)")
    ax.set_ylabel("share")
    ax.set_title("scores of used vs unused returns")
    ax.legend(fontsize=7)


def _expiry(ax: Axes, report: TuneReport) -> None:
    e = report.expiry
    if not isinstance(e, ExpiryFit):
        _not_fitted(ax, "expiry threshold", e)
        return
    ax.plot(e.grid, e.expired_share, label="memories expired", color="tab:blue")
    ax.plot(e.grid, e.never_used_expired_share, label="never-used expired", color="tab:purple")
    ax.plot(e.grid, e.regret, label="worst regret (later-used expired)", color="tab:red")
    ax.axvline(
        e.threshold,
        color="tab:green",
        linestyle="-" if e.validated else ":",
        label=_tuned(e.threshold, e.validated),
    )
    ax.axvline(e.current, color="grey", linestyle="--", label=f"current {e.current:.3f}")
    ax.set_xlim(0, min(0.6, max(e.threshold, e.current) + 0.15))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("expire below (eviction score)")
    ax.set_title(f"expiry replay over {len(e.cuts)} cuts ({e.decay} decay {e.default_decay:g}/day)")
    ax.legend(fontsize=7)


def _keep(ax: Axes, report: TuneReport) -> None:
    k = report.keep
    if not isinstance(k, KeepFit):
        _not_fitted(ax, "keep threshold", k)
        return
    width = float(k.bins[1] - k.bins[0]) if k.bins.size > 1 else 0.01
    edges = np.append(k.bins, k.bins[-1] + width) if k.bins.size else np.zeros(1)
    # one filled step artist per histogram (a bar per bin costs ~0.3 s of patches on 2 busy cores)
    ax.stairs(k.stored / max(k.stored.sum(), 1), edges, fill=True, alpha=0.5, label="stored")
    ax.stairs(k.used / max(k.used.sum(), 1), edges, fill=True, alpha=0.5, label="used")
    ax.axvline(
        k.threshold,
        color="tab:green",
        linestyle="-" if k.validated else ":",
        label=_tuned(k.threshold, k.validated),
    )
    ax.axvline(k.current, color="grey", linestyle="--", label=f"current {k.current:.2f}")
    ax.set_xlabel("importance at write")
    ax.set_ylabel("share")
    ax.set_title("write-trigger keep threshold")
    ax.legend(fontsize=7)


_DRAW = {
    "floor": _floor,
    "decay": _decay,
    "usage_by_age": _usage,
    "scores": _scores,
    "expiry": _expiry,
    "keep": _keep,
}


def write_plots(report: TuneReport, folder: Path) -> dict[str, Path]:
    """Write every plot of the module doc into ``folder`` (created); returns name -> path.

    The six panels are drawn once, on one figure (matplotlib's object API and Agg canvas: no pyplot
    import, no global figure state): ``tuning.png`` is that figure and each single plot is its panel
    cut out of the same pixels (the panel's tight box, labels and legend included). Fixed margins
    replace ``tight_layout``, which draws the figure once more to measure it. Profiled on the 1M-row
    synthetic population on 2 busy cores, drawing each plot twice (alone and on the page) with
    ``tight_layout`` was ~8 of the command's ~15 s.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 (only plotting needs it)
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.image import imsave  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(16, 8.5), dpi=90)
    canvas = FigureCanvasAgg(fig)
    axes = fig.subplots(2, 3)
    for ax, name in zip(axes.flat, PLOTS, strict=True):
        _DRAW[name](ax, report)
    summary: dict[str, Any] = report.summary
    fig.suptitle(
        f"hindsight tune: {summary.get('recalls')} recalls, {summary.get('positive_labels')} used labels, "
        f"{summary.get('memories')} memories ({report.options.signal} signal, {report.options.clock} clock)"
    )
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.07, top=0.91, wspace=0.24, hspace=0.34)
    canvas.draw()  # type: ignore[no-untyped-call]  # (Agg canvas methods carry no annotations)
    pixels = np.asarray(canvas.buffer_rgba())  # type: ignore[no-untyped-call]
    height, width = pixels.shape[:2]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    out: dict[str, Path] = {}
    for ax, name in zip(axes.flat, PLOTS, strict=True):
        box = ax.get_tightbbox(renderer)  # display pixels, origin at the bottom left
        if box is None:
            continue
        left, right = max(int(box.x0) - 4, 0), min(int(np.ceil(box.x1)) + 4, width)
        top, bottom = max(height - int(np.ceil(box.y1)) - 4, 0), min(height - int(box.y0) + 4, height)
        path = folder / f"{name}.png"
        imsave(path, pixels[top:bottom, left:right], format="png")
        out[name] = path
    path = folder / "tuning.png"
    imsave(path, pixels, format="png")
    out["tuning"] = path
    return out

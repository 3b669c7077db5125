"""``hindsight tune``: read ClickHouse, fit, report (DESIGN.md section 10).

:func:`tune` runs the aggregation queries of :class:`~hindsight.analytics.queries.TuningSql` (ClickHouse
does the work: Python only sees histograms and one row per stored memory), the fits of
:mod:`hindsight.tuning.fit`, and returns a :class:`TuneReport` with every statistic, the proposed
settings, the current ones, and the seconds each step took. :func:`render_table` prints it for a person.
Writing the settings file and the plots are separate steps (:mod:`hindsight.tuning.settings_file`,
:mod:`hindsight.tuning.plots`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight.analytics.queries import AGE_BUCKETS, Clock, Signal, TuningSql
from hindsight.scoring import EXPIRE_BELOW, RECENCY_DECAY_PER_DAY
from hindsight.tuning.fit import (
    EVICTION_DECAY_GRID,
    DecayFit,
    ExpiryFit,
    FloorFit,
    KeepFit,
    NotFitted,
    Snapshot,
    choose_expiry,
    fit_decay,
    fit_expiry,
    fit_floor,
    fit_keep,
    hazard_from_gaps,
)

if TYPE_CHECKING:
    from pathlib import Path

    from hindsight.analytics.store import AnalyticsStore
    from hindsight.tuning.settings_file import TunedFile

DEFAULT_CUTS = (0.4, 0.5, 0.6)
"""Training cuts of the expiry replay, as fractions of each user's recall window; their later uses
are looked at up to the held-out cut only."""
HOLDOUT_CUT = 0.7
"""The validation cut of the expiry replay (fraction of each user's recall window): its later uses
(to the end) are never seen by the training cuts."""
_TO_THE_END = 2.0


@dataclass(frozen=True)
class Current:
    """The settings in force (what the fits are compared with)."""

    similarity_floor: float = 0.65
    decay_per_day: float = RECENCY_DECAY_PER_DAY
    decay_per_day_by_type: dict[str, float] = field(default_factory=dict)
    expire_below: float = EXPIRE_BELOW
    keep_threshold: float = 0.2

    def as_dict(self) -> dict[str, Any]:
        """The values, keyed by the tuned-settings names."""
        return {
            "similarity_floor": self.similarity_floor,
            "decay_per_day": self.decay_per_day,
            "decay_per_day_by_type": dict(self.decay_per_day_by_type),
            "expire_below": self.expire_below,
            "keep_threshold": self.keep_threshold,
        }


@dataclass(frozen=True)
class TuneOptions:
    """What to fit and how (defaults: DESIGN.md section 10 and the issue)."""

    signal: Signal = "feedback"
    clock: Clock = "wall"
    tenant: str | None = None
    target_recall: float = 0.95
    """Share of used memories the similarity floor must keep."""
    max_regret: float = 0.0
    """Largest share of later-used memories the expiry threshold may expire (at any replay cut)."""
    keep_recall: float = 0.99
    """Share of used memories the keep threshold must keep."""
    target_expire_share: float = 0.0
    """When > 0: the smallest expiry threshold that expires this share of never-used memories is taken
    when it is below the zero-regret one (the storage goal with the most room to spare)."""
    holdout: float = 0.3
    """Share of the labelled history (the latest) held out to validate the floor and keep threshold."""
    bin_days: float = 1.0
    max_gap_days: float | None = 365.0
    cuts: tuple[float, ...] = DEFAULT_CUTS
    holdout_cut: float = HOLDOUT_CUT


@dataclass
class TuneReport:
    """Everything ``hindsight tune`` found."""

    options: TuneOptions
    current: Current
    summary: dict[str, Any]
    floor: FloorFit | NotFitted
    decay: dict[str, DecayFit | NotFitted]
    expiry: ExpiryFit | NotFitted
    keep: KeepFit | NotFitted
    usage_by_age: list[dict[str, Any]]
    scores: dict[str, dict[str, list[float]]]
    seconds: dict[str, float]
    expiry_alternatives: list[ExpiryFit | NotFitted] = field(default_factory=list)
    """Every eviction setting replayed (fitted decay first, then the current one, then
    :data:`~hindsight.tuning.fit.EVICTION_DECAY_GRID`); :attr:`expiry` is the one
    :func:`~hindsight.tuning.fit.choose_expiry` picked."""

    @property
    def decay_applied(self) -> bool:
        """A new eviction decay goes out with a validated expiry threshold: decay and threshold make one
        eviction score, so the fitted (or a grid) decay is applied only when the replay validated it
        together with the threshold."""
        return (
            isinstance(self.expiry, ExpiryFit)
            and self.expiry.validated
            and self.expiry.decay in ("fitted", "grid")
        )

    def decay_note(self) -> str:
        """Why the fitted decay is (not) applied."""
        if self.decay_applied and isinstance(self.expiry, ExpiryFit) and self.expiry.decay == "grid":
            return (
                f"not applied: the eviction decay {self.expiry.default_decay:g}/day (replay grid) goes out "
                "instead, with the validated expiry threshold that expired the most never-used memories"
            )
        if self.decay_applied:
            return "applied with the validated expiry threshold"
        if not any(isinstance(d, DecayFit) for d in self.decay.values()):
            return "not fitted"
        return "not applied: no expiry threshold validated with it on the held-out replay cut"

    def proposed(self) -> dict[str, Any]:
        """The tuned values that validated (the rest keeps its current value)."""
        out: dict[str, Any] = {}
        if isinstance(self.floor, FloorFit) and self.floor.validated:
            out["similarity_floor"] = round(self.floor.floor, 4)
        if self.decay_applied and isinstance(self.expiry, ExpiryFit) and self.expiry.decay == "grid":
            # one eviction decay for every memory type, as replayed
            out["decay_per_day"] = round(self.expiry.default_decay, 5)
            out["decay_per_day_by_type"] = {}
        elif self.decay_applied:
            fitted = {g: d for g, d in self.decay.items() if isinstance(d, DecayFit)}
            if "all" in fitted:
                out["decay_per_day"] = round(fitted["all"].rate_per_day, 5)
            by_type = {g: round(d.rate_per_day, 5) for g, d in fitted.items() if g != "all"}
            if by_type:
                out["decay_per_day_by_type"] = by_type
        if isinstance(self.expiry, ExpiryFit) and self.expiry.validated:
            out["expire_below"] = round(self.expiry.threshold, 4)
        if isinstance(self.keep, KeepFit) and self.keep.validated:
            out["keep_threshold"] = round(self.keep.threshold, 4)
        return out

    def fitted_any(self) -> bool:
        """Whether at least one value was fitted and validated (what :meth:`proposed` applies)."""
        return bool(self.proposed())

    def as_dict(self) -> dict[str, Any]:
        """The whole report as JSON-ready data."""
        return {
            "options": {
                "signal": self.options.signal,
                "clock": self.options.clock,
                "tenant": self.options.tenant,
                "target_recall": self.options.target_recall,
                "max_regret": self.options.max_regret,
                "keep_recall": self.options.keep_recall,
                "target_expire_share": self.options.target_expire_share,
                "holdout": self.options.holdout,
            },
            "summary": self.summary,
            "current": self.current.as_dict(),
            "proposed": self.proposed(),
            "fits": {
                "similarity_floor": self.floor.as_dict(),
                "decay": {g: d.as_dict() for g, d in self.decay.items()},
                "decay_applied": self.decay_applied,
                "decay_note": self.decay_note(),
                "expire_below": self.expiry.as_dict(),
                "expire_below_alternatives": [e.as_dict() for e in self.expiry_alternatives[1:]],
                "keep_threshold": self.keep.as_dict(),
            },
            "usage_by_age": self.usage_by_age,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def _snapshots(
    store: AnalyticsStore, sql: TuningSql, params: dict[str, Any], cuts: list[float], holdout_cut: float
) -> list[Snapshot]:
    """The stored memories at each training cut and at the held-out cut, from one aggregation pass
    (:meth:`TuningSql.replay`; cuts are fractions of each user's recall window)."""
    fractions = [*cuts, holdout_cut]
    horizons = [holdout_cut] * len(cuts) + [_TO_THE_END]
    cols = store.columns(sql.replay(), {**params, "cuts": fractions, "horizons": horizons})
    users = cols.get("user_key", [])
    if not users:
        return []
    _, user_index = np.unique(np.asarray(users, dtype=object), return_inverse=True)
    born = np.asarray(cols["born"], dtype=np.float64)
    importance = np.asarray(cols["importance"], dtype=np.float64)
    types = np.asarray([str(t) for t in cols["memory_type"]], dtype=object)
    shape = (len(users), len(fractions))
    cut_day = np.asarray(cols["cut_day"], dtype=np.float64).reshape(shape)
    accesses = np.asarray(cols["accesses_before"], dtype=np.float64).reshape(shape)
    last = np.asarray(cols["last_access_before"], dtype=np.float64).reshape(shape)
    uses = np.asarray(cols["uses_before"], dtype=np.float64).reshape(shape)
    after = np.asarray(cols["used_after"], dtype=bool).reshape(shape)
    out = []
    for k, fraction in enumerate(fractions):
        alive = born < cut_day[:, k]
        out.append(
            Snapshot(
                cut=fraction,
                user=user_index[alive].astype(np.int64),
                memory_type=types[alive].tolist(),
                importance=importance[alive],
                born=born[alive],
                cut_day=cut_day[alive, k],
                accesses_before=accesses[alive, k],
                last_access_before=last[alive, k],
                uses_before=uses[alive, k],
                used_after=after[alive, k],
                holdout=k == len(cuts),
            )
        )
    return out


@contextmanager
def _staged(store: AnalyticsStore, sql: TuningSql, params: dict[str, Any]) -> Iterator[TuningSql]:
    """``sql`` reading the returned candidates from a temporary in-memory table filled by one scan of
    ``recall_candidates`` (instead of one scan per query); the table is dropped on exit."""
    table = store.names.table(f"tune_returned_{uuid.uuid4().hex[:12]}")
    store.command(f"CREATE TABLE {table} ENGINE = Memory AS {sql.returned()}", params)
    try:
        yield replace(sql, source=table)
    finally:
        store.command(f"DROP TABLE IF EXISTS {table}")


def tune(
    store: AnalyticsStore, options: TuneOptions | None = None, current: Current | None = None
) -> TuneReport:
    """Run every fit over the analytics tables of ``store`` (module doc).

    Raises:
        StoreUnavailableError: ClickHouse failed.
        ValueError: ``holdout`` outside (0, 1), ``target_expire_share`` outside [0, 1), or the held-out
            replay cut not after every training cut.
    """
    opts = options or TuneOptions()
    cur = current or Current()
    if not 0.0 < opts.holdout < 1.0:
        raise ValueError(f"--holdout is a share in (0, 1), got {opts.holdout}")
    if not 0.0 <= opts.target_expire_share < 1.0:
        raise ValueError(f"--target-expire-share is a share in [0, 1), got {opts.target_expire_share}")
    if opts.cuts and max(opts.cuts) >= opts.holdout_cut:
        raise ValueError(f"replay cuts {opts.cuts} must all precede the held-out cut {opts.holdout_cut}")
    sql = TuningSql(
        store.names, signal=opts.signal, clock=opts.clock, tenant=opts.tenant, holdout=opts.holdout
    )
    params: dict[str, Any] = {"tenant": opts.tenant} if opts.tenant else {}
    started = time.perf_counter()
    with _staged(store, sql, params) as staged:
        staged_s = time.perf_counter() - started
        report = _tune(store, staged, params, opts, cur)
    report.seconds = {"stage": staged_s, **report.seconds}
    report.seconds["total"] = time.perf_counter() - started
    return report


def _tune(
    store: AnalyticsStore, sql: TuningSql, params: dict[str, Any], opts: TuneOptions, cur: Current
) -> TuneReport:
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    summary_cols = store.columns(sql.summary(), params)
    summary = {k: (v[0] if v else None) for k, v in summary_cols.items()}
    seconds["summary"] = time.perf_counter() - t

    t = time.perf_counter()
    split = {**params, "split": float(summary.get("split_day") or 0.0)}
    hist = store.columns(sql.similarity_histogram(split=True), split)
    floor = fit_floor(
        hist.get("bin", []),
        hist.get("positive", []),
        hist.get("negative", []),
        holdout_positives=hist.get("holdout_positive", []),
        target_recall=opts.target_recall,
        current=cur.similarity_floor,
    )
    scores = {}
    for column in ("similarity", "final_score"):
        h = store.columns(sql.score_histogram(column), params)
        scores[column] = {k: [float(x) for x in v] for k, v in h.items()}
    seconds["floor"] = time.perf_counter() - t

    t = time.perf_counter()
    gaps = store.columns(sql.reuse_gaps(opts.bin_days), params)
    decay: dict[str, DecayFit | NotFitted] = {}
    types = sorted({str(x) for x in gaps.get("memory_type", [])})
    groups = {"all": np.ones(len(gaps.get("bin", [])), dtype=bool)} | {
        ty: np.asarray([str(x) == ty for x in gaps["memory_type"]], dtype=bool) for ty in types
    }
    for group, mask in groups.items():
        hazard = hazard_from_gaps(
            np.asarray(gaps.get("bin", []), dtype=np.int64)[mask],
            np.asarray(gaps.get("censored", []), dtype=np.int64)[mask],
            np.asarray(gaps.get("n", []), dtype=np.int64)[mask],
            np.asarray(gaps.get("gap_sum", []), dtype=np.float64)[mask],
            opts.bin_days,
        )
        decay[group] = fit_decay(group, hazard, max_days=opts.max_gap_days)
    seconds["decay"] = time.perf_counter() - t

    t = time.perf_counter()
    snapshots = _snapshots(store, sql, params, list(opts.cuts), opts.holdout_cut)
    settings: list[tuple[str, dict[str, float], float]] = []
    pooled = decay.get("all")
    if isinstance(pooled, DecayFit):
        by_type = dict(cur.decay_per_day_by_type)
        by_type.update(
            {g: d.rate_per_day for g, d in decay.items() if isinstance(d, DecayFit) and g != "all"}
        )
        settings.append(("fitted", by_type, pooled.rate_per_day))
    settings.append(("current", dict(cur.decay_per_day_by_type), cur.decay_per_day))
    settings.extend(("grid", {}, rate) for rate in EVICTION_DECAY_GRID)
    alternatives: list[ExpiryFit | NotFitted] = [
        fit_expiry(
            snapshots,
            by_type,
            default_decay,
            max_regret=opts.max_regret,
            target_expire_share=opts.target_expire_share,
            current=cur.expire_below,
            decay=label,
        )
        for label, by_type, default_decay in settings
    ]
    expiry = choose_expiry(alternatives)
    seconds["expiry"] = time.perf_counter() - t

    t = time.perf_counter()
    imp = store.columns(sql.importance_histogram(split=True), split)
    keep = fit_keep(
        imp.get("bin", []),
        imp.get("stored", []),
        imp.get("used", []),
        holdout_used=imp.get("holdout_used", []),
        keep_recall=opts.keep_recall,
        current=cur.keep_threshold,
    )
    usage = store.columns(sql.usage_by_age(), params)
    edges = (0.0, *AGE_BUCKETS)
    usage_rows = [
        {
            "memory_type": str(ty),
            "age_days": f"{edges[b - 1]:g}-{edges[b]:g}" if 0 < b < len(edges) else f">={edges[-1]:g}",
            "returned": int(n),
            "used": int(u),
            "used_rate": round(u / n, 4) if n else 0.0,
        }
        for ty, b, n, u in zip(
            usage.get("memory_type", []),
            (int(b) if int(b) > 0 else len(edges) for b in usage.get("age_bucket", [])),
            usage.get("returned", []),
            usage.get("used", []),
            strict=False,
        )
    ]
    seconds["keep_and_usage"] = time.perf_counter() - t
    return TuneReport(
        opts, cur, summary, floor, decay, expiry, keep, usage_rows, scores, seconds, alternatives
    )


@dataclass(frozen=True)
class TuneOutcome:
    """What a tuning run produced."""

    report: TuneReport
    plots: dict[str, Path]
    written: TunedFile | None
    report_path: Path

    def line(self) -> dict[str, Any]:
        """The JSON line ``hindsight tune`` prints."""
        return {
            **self.report.as_dict(),
            "plots": {k: str(v) for k, v in self.plots.items()},
            "report": str(self.report_path),
            "written_version": self.written.version if self.written is not None else None,
        }


def run_and_write(
    store: AnalyticsStore,
    options: TuneOptions,
    current: Current,
    *,
    tuned_path: Path,
    plots_dir: Path | None,
    write: bool,
) -> TuneOutcome:
    """Tune, write the plots and ``report.json`` beside ``tuned_path``, and (``write``) a new version of
    the tuned-settings file when anything was fitted. Shared by the CLI and the console."""
    from hindsight.tuning import settings_file  # noqa: PLC0415
    from hindsight.tuning.plots import write_plots  # noqa: PLC0415

    report = tune(store, options, current)
    folder = plots_dir if plots_dir is not None else tuned_path.parent / "plots"
    plots = write_plots(report, folder)
    written = None
    if write and report.fitted_any():
        written = settings_file.write(
            tuned_path,
            report.proposed(),
            source={"signal": options.signal, "clock": options.clock, "tenant": options.tenant},
            statistics=report.as_dict()["fits"],
        )
    report_path = tuned_path.parent / "report.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    outcome = TuneOutcome(report, plots, written, report_path)
    report_path.write_text(json.dumps(outcome.line(), indent=2, default=str) + "\n", encoding="utf-8")
    return outcome


def render_table(report: TuneReport) -> str:
    """The report as a fixed-width table for a terminal: one line per setting (current, tuned, the
    statistic that backs it) and one per refusal, then the data it rests on."""
    cur = report.current.as_dict()
    proposed = report.proposed()
    lines = [f"{'setting':<28}{'current':>10}{'tuned':>10}  evidence", "-" * 100]

    def row(name: str, evidence: str, fitted: float | None = None) -> None:
        now = cur.get(name)
        new = proposed.get(name)
        now_s = f"{now:.4g}" if isinstance(now, float) else "-"
        new_s = f"{new:.4g}" if isinstance(new, float) else "-"
        if new is None and fitted is not None:
            new_s = f"({fitted:.4g})"  # fitted, not applied
        lines.append(f"{name:<28}{now_s:>10}{new_s:>10}  {evidence}")

    def held(fit: FloorFit | ExpiryFit | KeepFit) -> str:
        return "validated on held-out data" if fit.validated else f"NOT APPLIED: {fit.reason}"

    f = report.floor
    if isinstance(f, FloorFit):
        kept = "-" if f.holdout_recall is None else f"{f.holdout_recall:.1%}"
        row(
            "similarity_floor",
            f"keeps {f.recall:.1%} of used at precision {f.precision:.1%}, {kept} of {f.holdout_positives} "
            f"held-out (95% CI {f.ci95[0]:.3f}-{f.ci95[1]:.3f}; {f.positives} used / {f.negatives} unused "
            f"labels; now {f.current_recall:.1%} / {f.current_precision:.1%}); {held(f)}",
            f.floor,
        )
    else:
        row("similarity_floor", f"NOT FITTED: {f.reason}")
    e = report.expiry
    fitted_out = report.decay_applied and isinstance(e, ExpiryFit) and e.decay == "fitted"
    note = "" if fitted_out else f"; {report.decay_note()}"
    for group, d in report.decay.items():
        name = "decay_per_day" if group == "all" else f"decay_per_day[{group}]"
        if isinstance(d, DecayFit):
            now = cur["decay_per_day_by_type"].get(group, cur["decay_per_day"])
            shown = f"{d.rate_per_day:.4g}" if fitted_out else f"({d.rate_per_day:.4g})"
            lines.append(
                f"{name:<28}{now:>10.4g}{shown:>10}  half-life {d.half_life_days:.1f} d "
                f"(95% CI {d.half_life_ci95[0]:.1f}-{d.half_life_ci95[1]:.1f}); {d.events} reuses over "
                f"{d.exposure_days:.0f} memory-days; deviance/df {d.deviance_per_df:.2f}{note}"
            )
        else:
            lines.append(f"{name:<28}{cur['decay_per_day']:>10.4g}{'-':>10}  NOT FITTED: {d.reason}")
    if isinstance(e, ExpiryFit):
        i = int(np.argmin(np.abs(e.grid - e.threshold)))
        h = e.holdout
        row(
            "expire_below",
            f"{e.decay} decay {e.default_decay:.4g}/day: expires {e.expired_share[i]:.1%} of memories, "
            f"{e.never_used_expired_share[i]:.1%} of never-used, worst regret {e.regret[i]:.1%} over "
            f"{len(e.cuts)} cuts; held-out cut: "
            f"{h.get('later_used_expired', '-')} of {h.get('used_after', '-')} later-used expired "
            f"(now: regret {e.current_regret:.1%}, never-used expired {e.current_never_used_expired:.1%}); "
            f"{held(e)}",
            e.threshold,
        )
    else:
        row("expire_below", f"NOT FITTED: {e.reason}")
    k = report.keep
    if isinstance(k, KeepFit):
        row(
            "keep_threshold",
            f"keeps {k.used_kept:.1%} of {k.used_memories} used memories, would not store "
            f"{k.stored_saved:.1%} of {k.stored_memories}; {held(k)}",
            k.threshold,
        )
    else:
        row("keep_threshold", f"NOT FITTED: {k.reason}")
    s = report.summary
    lines.append("-" * 100)
    lines.append(
        f"data: {s.get('recalls')} recalls, {s.get('candidates')} candidates, {s.get('returned')} returned, "
        f"{s.get('recalls_with_feedback')} recalls with feedback ({s.get('positive_labels')} used / "
        f"{s.get('negative_labels')} unused labels), {s.get('uses')} uses ({report.options.signal}), "
        f"{s.get('memories')} stored memories; {report.seconds.get('total', 0):.2f} s"
    )
    return "\n".join(lines)

"""``hindsight audit``: anomalies in what the memory holds and what the guard held back (issue 10 item 3).

Reads the vector store (every memory, every status) and the ClickHouse quarantine table, and
reports, per tenant:

==================  ===========================================================================
kind                fires when
==================  ===========================================================================
confidence_jump     a memory's confidence rose by >= ``confidence_jump`` over the version it
                    superseded, or sits >= ``confidence_jump`` above its source's initial trust
                    while backed by a single event (a raise nothing supports)
unknown_source      the guard quarantined events whose source is not in the trust table
new_source          an agent, or a tool, first seen inside the window (the tenant has history
                    from before it), with its event count in the window
conflict_rate       an agent whose memories supersede earlier ones (or were held back by the
                    consistency check) in >= ``conflict_rate`` of its >= ``min_events`` writes
quarantine_rate     an agent/source whose events were quarantined in >= ``quarantine_rate`` of
                    its >= ``min_events`` events (quarantined + stored)
quarantine_spike    a quarantine reason whose daily count in the window is >= ``spike_ratio``
                    times its daily count before it (>= ``min_events`` in the window; a reason
                    never seen before counts once; a tenant with under a day of history before
                    the window has no baseline)
==================  ===========================================================================

plus the quarantine table by (source, tool, reason) with counts in and before the window. The
thresholds are settings (:class:`AuditSettings`); the defaults are ours, chosen to flag what an
operator should look at on the first page (documented in ``docs/guard.md``).

The memory scan pages through the store (``scroll``); the quarantine figures are ClickHouse
aggregates (``FINAL``). Nothing here writes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from hindsight.stores.vector import MemoryFilter

if TYPE_CHECKING:
    from hindsight.stores.quarantine import QuarantineStore
    from hindsight.stores.vector import VectorStore

DEFAULT_TRUST: Final[Mapping[str, float]] = {"tool": 0.8, "user": 0.6, "assistant": 0.4, "system": 0.7}
"""Initial confidence by source (DESIGN.md section 4; the guard's default trust table)."""
_PAGE: Final[int] = 1000


@dataclass(frozen=True)
class AuditSettings:
    """Thresholds of the audit (``hindsight audit --help`` sets them)."""

    window_days: float = 7.0
    """The recent window compared with everything before it."""
    confidence_jump: float = 0.3
    """Half the distance between assistant (0.4) and tool (0.8) trust: more than a source change explains."""
    conflict_rate: float = 0.2
    quarantine_rate: float = 0.2
    spike_ratio: float = 3.0
    min_events: int = 5
    """Fewest events behind a rate before it can fire (a rate of 1 in 2 is noise)."""


@dataclass(frozen=True)
class Anomaly:
    """One finding: ``kind`` (see the module docstring), the ``subject`` it is about (a memory id, an
    agent, ``source/tool``, a reason), the measured ``value`` and the ``threshold`` it crossed."""

    kind: str
    tenant_id: str
    subject: str
    value: float
    threshold: float
    count: int
    detail: str


@dataclass(frozen=True)
class QuarantineRate:
    """Quarantined items of one (tenant, source, tool, reason): all, and inside the window."""

    tenant_id: str
    source: str
    tool_name: str
    reason: str
    items: int
    in_window: int


@dataclass
class AuditReport:
    """What :func:`audit` found."""

    generated_at: datetime
    window_start: datetime
    memories: int
    quarantined: int
    anomalies: list[Anomaly] = field(default_factory=list)
    quarantine_rates: list[QuarantineRate] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-safe data (times as ISO strings)."""
        return {
            "generated_at": self.generated_at.isoformat(),
            "window_start": self.window_start.isoformat(),
            "memories": self.memories,
            "quarantined": self.quarantined,
            "anomalies": [asdict(a) for a in self.anomalies],
            "quarantine_rates": [asdict(r) for r in self.quarantine_rates],
        }


@dataclass(frozen=True)
class _Mem:
    id: str
    tenant: str
    agent: str
    source: str
    confidence: float
    parent: str | None
    version: int
    support: int
    stored: datetime


def _memories(store: VectorStore, tenant_id: str | None) -> list[_Mem]:
    flt = MemoryFilter(tenant_id=tenant_id, statuses=None) if tenant_id else None
    out: list[_Mem] = []
    offset: str | None = None
    while True:
        page, offset = store.scroll(flt, _PAGE, offset)
        for record in page:
            p = record.payload
            out.append(
                _Mem(
                    id=record.id,
                    tenant=str(p.get("tenant_id", "")),
                    agent=str(p.get("agent_id", "")),
                    source=str(p.get("source", "")),
                    confidence=float(p.get("confidence", 0.0)),
                    parent=p.get("parent_id"),
                    version=int(p.get("version", 1)),
                    support=1 + len(p.get("merged_ids", ())),
                    stored=datetime.fromtimestamp(float(p.get("stored_ts", 0.0)), UTC),
                )
            )
        if offset is None:
            return out


def _confidence_jumps(mems: list[_Mem], cfg: AuditSettings) -> Iterable[Anomaly]:
    by_id = {m.id: m for m in mems}
    for m in mems:
        parent = by_id.get(m.parent) if m.parent else None
        if parent is not None and m.confidence - parent.confidence >= cfg.confidence_jump:
            yield Anomaly(
                "confidence_jump",
                m.tenant,
                m.id,
                round(m.confidence - parent.confidence, 4),
                cfg.confidence_jump,
                1,
                f"v{parent.version} {parent.confidence:.2f} -> v{m.version} {m.confidence:.2f} "
                f"(source {m.source}, agent {m.agent})",
            )
            continue
        trust = DEFAULT_TRUST.get(m.source, 0.0)
        if m.confidence - trust >= cfg.confidence_jump and m.support < 2:
            yield Anomaly(
                "confidence_jump",
                m.tenant,
                m.id,
                round(m.confidence - trust, 4),
                cfg.confidence_jump,
                1,
                f"confidence {m.confidence:.2f} vs {m.source} trust {trust:.2f} with one supporting event "
                f"(agent {m.agent})",
            )


def _new_sources(
    mems: list[_Mem], rows: list[tuple[str, str, str, str, datetime]], start: datetime
) -> Iterable[Anomaly]:
    """``rows``: quarantine (tenant, agent, source, tool, quarantined_at)."""
    first: dict[tuple[str, str], datetime] = {}
    in_window: Counter[tuple[str, str]] = Counter()
    tenant_first: dict[str, datetime] = {}
    seen = [(m.tenant, f"agent {m.agent}", m.stored) for m in mems]
    seen += [(t, f"agent {a}", at) for t, a, _, _, at in rows]
    seen += [(t, f"tool {tool}", at) for t, _, _, tool, at in rows if tool]
    for tenant, subject, at in seen:
        key = (tenant, subject)
        first[key] = min(first.get(key, at), at)
        tenant_first[tenant] = min(tenant_first.get(tenant, at), at)
        in_window[key] += at >= start
    for (tenant, subject), at in sorted(first.items()):
        if at >= start and tenant_first[tenant] < start:
            yield Anomaly(
                "new_source",
                tenant,
                subject,
                float(in_window[(tenant, subject)]),
                0.0,
                in_window[(tenant, subject)],
                f"first seen {at.isoformat(timespec='seconds')}",
            )


def _rate(
    kind: str, tenant: str, subject: str, *, hits: int, total: int, threshold: float, what: str
) -> Anomaly:
    return Anomaly(
        kind, tenant, subject, round(hits / total, 4), threshold, total, f"{hits} of {total} {what}"
    )


_Row = tuple[str, str, str, str, tuple[str, ...], datetime]
"""A quarantine item: (tenant, agent, source, tool, reasons, quarantined_at)."""


def _conflict_rates(mems: list[_Mem], rows: list[_Row], cfg: AuditSettings) -> Iterable[Anomaly]:
    writes: Counter[tuple[str, str]] = Counter((m.tenant, m.agent) for m in mems)
    conflicts: Counter[tuple[str, str]] = Counter((m.tenant, m.agent) for m in mems if m.parent)
    for t, a, _, _, reasons, _ in rows:
        if any(r.startswith("consistency:") for r in reasons):
            writes[(t, a)] += 1
            conflicts[(t, a)] += 1
    for (t, a), n in sorted(writes.items()):
        if n >= cfg.min_events and conflicts[(t, a)] / n >= cfg.conflict_rate:
            yield _rate(
                "conflict_rate",
                t,
                f"agent {a}",
                hits=conflicts[(t, a)],
                total=n,
                threshold=cfg.conflict_rate,
                what="writes conflict",
            )


def _quarantine_rates(mems: list[_Mem], rows: list[_Row], cfg: AuditSettings) -> Iterable[Anomaly]:
    stored: Counter[tuple[str, str, str]] = Counter((m.tenant, m.agent, m.source) for m in mems)
    held: Counter[tuple[str, str, str]] = Counter((r[0], r[1], r[2]) for r in rows)
    for key in sorted(stored.keys() | held.keys()):
        total = stored[key] + held[key]
        if total >= cfg.min_events and held[key] / total >= cfg.quarantine_rate:
            t, a, s = key
            yield _rate(
                "quarantine_rate",
                t,
                f"agent {a} / {s}",
                hits=held[key],
                total=total,
                threshold=cfg.quarantine_rate,
                what="events quarantined",
            )


def _spikes(
    mems: list[_Mem], rows: list[_Row], start: datetime, cfg: AuditSettings
) -> tuple[list[Anomaly], list[QuarantineRate]]:
    tenant_first: dict[str, datetime] = {}
    for tenant, at in [(r[0], r[5]) for r in rows] + [(m.tenant, m.stored) for m in mems]:
        tenant_first[tenant] = min(tenant_first.get(tenant, at), at)
    window_by: Counter[tuple[str, str]] = Counter()
    before_by: Counter[tuple[str, str]] = Counter()
    cells: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for t, _, source, tool, reasons, at in rows:
        for reason in reasons:
            (window_by if at >= start else before_by)[(t, reason)] += 1
            cell = cells[(t, source, tool, reason)]
            cell[0] += 1
            cell[1] += at >= start
    spikes = []
    for (t, reason), n in sorted(window_by.items()):
        before_days = (start - tenant_first[t]).total_seconds() / 86400
        if n < cfg.min_events or before_days < 1.0:
            continue  # too few, or a tenant without a day of history before the window: no baseline
        per_day_window = n / cfg.window_days
        before = before_by[(t, reason)]
        # add-one smoothing: a reason never seen before counts as once before (a finite, cautious ratio)
        ratio = per_day_window / (max(before, 1) / before_days)
        if ratio >= cfg.spike_ratio:
            spikes.append(
                Anomaly(
                    "quarantine_spike",
                    t,
                    reason,
                    round(ratio, 2),
                    cfg.spike_ratio,
                    n,
                    f"{per_day_window:.1f}/day in the window vs {before / before_days:.2f}/day before"
                    + (" (never before)" if not before else ""),
                )
            )
    rates = sorted(
        (QuarantineRate(t, s, tool, r, n, w) for (t, s, tool, r), (n, w) in cells.items()),
        key=lambda q: (-q.items, q.tenant_id, q.source, q.tool_name, q.reason),
    )
    return spikes, rates


_ORDER: Final[dict[str, int]] = {
    k: i
    for i, k in enumerate(
        (
            "confidence_jump",
            "unknown_source",
            "new_source",
            "conflict_rate",
            "quarantine_rate",
            "quarantine_spike",
        )
    )
}


def audit(
    store: VectorStore,
    quarantine: QuarantineStore,
    *,
    tenant_id: str | None = None,
    settings: AuditSettings | None = None,
    now: datetime | None = None,
) -> AuditReport:
    """Scan the stores and report anomalies (module docstring): by kind, then tenant, strongest first.

    Raises:
        StoreUnavailableError: the vector store or ClickHouse failed.
    """
    cfg = settings or AuditSettings()
    now = now or datetime.now(UTC)
    start = now - timedelta(days=cfg.window_days)
    mems = _memories(store, tenant_id)
    rows = quarantine.audit_rows(tenant_id)
    report = AuditReport(now, start, len(mems), len(rows))
    anomalies = report.anomalies
    anomalies.extend(_confidence_jumps(mems, cfg))
    anomalies.extend(_new_sources(mems, [(r[0], r[1], r[2], r[3], r[5]) for r in rows], start))
    unknown: Counter[str] = Counter(r[0] for r in rows if "unknown_source" in r[4])
    anomalies.extend(
        Anomaly(
            "unknown_source",
            t,
            "unknown_source",
            float(n),
            0.0,
            n,
            f"{n} events from a source not in the trust table",
        )
        for t, n in sorted(unknown.items())
    )
    anomalies.extend(_conflict_rates(mems, rows, cfg))
    anomalies.extend(_quarantine_rates(mems, rows, cfg))
    spikes, report.quarantine_rates = _spikes(mems, rows, start, cfg)
    anomalies.extend(spikes)
    anomalies.sort(key=lambda a: (_ORDER[a.kind], a.tenant_id, -a.value, a.subject))
    return report

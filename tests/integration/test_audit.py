"""``hindsight audit`` on real stores (the Qdrant engine and chDB) with seeded anomalies next to
near-misses that must not fire (issue 10 item 3)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from clickhouse_connect.driver.client import Client

from hindsight.audit import AuditSettings, audit
from hindsight.records import to_payload
from hindsight.stores.quarantine import QuarantineStore
from hindsight.stores.vector import VectorRecord
from hindsight.stores.vector_edge import EdgeVectorStore
from schemas import Memory, QuarantineRecord

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(days=30)
RECENT = NOW - timedelta(days=1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeVectorStore]:
    s = EdgeVectorStore(tmp_path / "memories", 8)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def quarantine(clickhouse_client: Client) -> QuarantineStore:
    q = QuarantineStore(clickhouse_client, f"quarantine_audit_{uuid.uuid4().hex[:8]}")
    q.ensure_schema()
    return q


class Seeder:
    def __init__(self, store: EdgeVectorStore, quarantine: QuarantineStore, tenant: str) -> None:
        self.store, self.quarantine, self.tenant = store, quarantine, tenant
        self.records: list[VectorRecord] = []
        self.held: list[QuarantineRecord] = []

    def memory(
        self,
        *,
        agent: str,
        source: str = "tool",
        confidence: float = 0.8,
        at: datetime = OLD,
        parent: str | None = None,
        version: int = 1,
        merged: int = 0,
    ) -> str:
        mid = str(uuid.uuid4())
        memory = Memory(
            id=mid,
            tenant_id=self.tenant,
            user_id="u1",
            agent_id=agent,
            session_id="s",
            type="episodic",
            content=f"memory {len(self.records)}",
            source=source,  # type: ignore[arg-type]
            importance=0.5,
            confidence=confidence,
            created_at=at,
            stored_at=at,
            last_accessed_at=at,
            parent_id=parent,
            version=version,
            status="active",
        )
        payload = to_payload(memory, merged_ids=[str(uuid.uuid4()) for _ in range(merged)])
        rng = np.random.default_rng(len(self.records))
        self.records.append(VectorRecord(mid, rng.random(8).astype(np.float32), payload))
        return mid

    def quarantined(
        self,
        *,
        agent: str,
        reasons: tuple[str, ...],
        source: str = "tool",
        tool: str | None = None,
        at: datetime = OLD,
    ) -> None:
        self.held.append(
            QuarantineRecord(
                tenant_id=self.tenant,
                user_id="u1",
                agent_id=agent,
                session_id="s",
                event_id=str(uuid.uuid4()),
                verdict="quarantine",
                reasons=reasons,
                source=source,  # type: ignore[arg-type]
                quarantined_at=at,
                tool_name=tool,
            )
        )

    def flush(self) -> None:
        self.store.upsert(self.records)
        self.quarantine.add(self.held)


def seed(store: EdgeVectorStore, quarantine: QuarantineStore) -> Seeder:
    s = Seeder(store, quarantine, "t1")
    # steady history: agent "crm" writes 20 tool memories a month ago, none conflicting
    crm = [s.memory(agent="crm") for _ in range(20)]
    # confidence jump along a version chain (0.4 -> 0.8 = +0.4) ...
    first = s.memory(agent="chat", source="assistant", confidence=0.4)
    s.memory(agent="chat", source="assistant", confidence=0.8, parent=first, version=2, at=RECENT)
    # ... a rise just under the threshold (0.6 -> 0.85 = +0.25) is not one
    base = s.memory(agent="chat", source="user", confidence=0.6)
    s.memory(agent="chat", source="user", confidence=0.85, parent=base, version=2, at=RECENT)
    # confidence far above the source's trust with one supporting event (assistant 0.4 -> 0.9) ...
    s.memory(agent="chat", source="assistant", confidence=0.9)
    # ... the same confidence backed by three events is support, not a jump
    s.memory(agent="chat", source="assistant", confidence=0.9, merged=2)
    for _ in range(5):  # chat's two superseding writes are 2 of 11 (0.18): under the conflict rate
        s.memory(agent="chat", source="user", confidence=0.6)
    # a new agent appears this week and conflicts a lot: 3 of its 6 writes supersede memories
    for i in range(6):
        s.memory(agent="scraper", at=RECENT, parent=crm[i] if i < 3 else None, version=2 if i < 3 else 1)
    # a borderline agent: 1 of 6 writes conflicts (0.17 < 0.2) and it is old
    for i in range(6):
        s.memory(agent="calendar", parent=base if i == 0 else None, version=2 if i == 0 else 1)
    # quarantine: the scraper's tool "web_fetch" is new and mostly held back (5 held vs 6 stored = 0.45)
    for _ in range(5):
        s.quarantined(agent="scraper", reasons=("poisoning:indirect_injection",), tool="web_fetch", at=RECENT)
    # crm: 2 held of 22 events (0.09), spread over the month: no rate, no spike
    s.quarantined(agent="crm", reasons=("poisoning:indirect_injection",), tool="crm_sync")
    s.quarantined(agent="crm", reasons=("secret:api_key",), tool="crm_sync", at=OLD + timedelta(days=2))
    # an unknown source was quarantined once
    s.quarantined(agent="crm", reasons=("unknown_source",), tool="crm_sync")
    s.flush()
    # another tenant with its own (normal) history never shows up in t1's report
    other = Seeder(store, quarantine, "t2")
    for _ in range(6):
        other.quarantined(agent="x", reasons=("poisoning:directive",), source="user", at=RECENT)
    other.flush()
    return s


def test_audit_finds_the_seeded_anomalies_and_not_the_near_misses(
    store: EdgeVectorStore, quarantine: QuarantineStore
) -> None:
    seeded = seed(store, quarantine)
    lone = next(
        r.id for r in seeded.records if r.payload["confidence"] == 0.9 and not r.payload["merged_ids"]
    )
    chain_top = next(
        r.id for r in seeded.records if r.payload["version"] == 2 and r.payload["confidence"] == 0.8
    )
    report = audit(store, quarantine, tenant_id="t1", now=NOW)
    found = {(a.kind, a.subject) for a in report.anomalies}
    assert found == {
        ("confidence_jump", chain_top),
        ("confidence_jump", lone),
        ("unknown_source", "unknown_source"),
        ("new_source", "agent scraper"),
        ("new_source", "tool web_fetch"),
        ("conflict_rate", "agent scraper"),
        ("quarantine_rate", "agent scraper / tool"),
        ("quarantine_spike", "poisoning:indirect_injection"),
    }
    by_kind = {a.kind + "|" + a.subject: a for a in report.anomalies}
    assert by_kind["conflict_rate|agent scraper"].value == 0.5
    assert by_kind["quarantine_rate|agent scraper / tool"].value == round(5 / 11, 4)
    assert by_kind["new_source|agent scraper"].count == 11  # 6 memories + 5 quarantined this week
    assert by_kind[f"confidence_jump|{chain_top}"].value == pytest.approx(0.4)
    assert report.memories == len(seeded.records)
    assert report.quarantined == len(seeded.held)
    rates = {(r.tool_name, r.reason): (r.items, r.in_window) for r in report.quarantine_rates}
    assert rates[("web_fetch", "poisoning:indirect_injection")] == (5, 5)
    assert rates[("crm_sync", "poisoning:indirect_injection")] == (1, 0)


def test_thresholds_move_what_fires(store: EdgeVectorStore, quarantine: QuarantineStore) -> None:
    seed(store, quarantine)
    strict = audit(store, quarantine, tenant_id="t1", now=NOW, settings=AuditSettings(conflict_rate=0.1))
    assert ("conflict_rate", "agent calendar") in {(a.kind, a.subject) for a in strict.anomalies}
    lax = audit(
        store, quarantine, tenant_id="t1", now=NOW, settings=AuditSettings(confidence_jump=0.6, min_events=20)
    )
    kinds = {a.kind for a in lax.anomalies}
    assert "confidence_jump" not in kinds
    assert "conflict_rate" not in kinds
    assert "quarantine_rate" not in kinds


def test_every_tenant_and_json_output(store: EdgeVectorStore, quarantine: QuarantineStore) -> None:
    seed(store, quarantine)
    report = audit(store, quarantine, now=NOW)
    tenants = {a.tenant_id for a in report.anomalies}
    assert tenants == {"t1", "t2"}
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["memories"] == report.memories
    assert len(doc["anomalies"]) == len(report.anomalies)
    # t2 has no history before the window: its agent is not "new" and its reason has no baseline to
    # spike against, but every one of its events was quarantined
    t2 = {(a["kind"], a["subject"]) for a in doc["anomalies"] if a["tenant_id"] == "t2"}
    assert t2 == {("quarantine_rate", "agent x / user")}


def test_cli_prints_the_table_and_json(tmp_path: Path) -> None:
    """The README command against a (stopped) embedded data directory: its own chDB path, so it
    runs in a child process (chDB allows one data path per process)."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    script = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from services.cli.main import app\n"
        "r = CliRunner().invoke(app, ['audit', '--data-dir', sys.argv[1], '--json'])\n"
        "print(r.exit_code); print(r.output)\n"
        "t = CliRunner().invoke(app, ['audit', '--data-dir', sys.argv[1]])\n"
        "print(t.exit_code); print(t.output)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300, check=True
    ).stdout.splitlines()
    assert out[0] == "0"
    doc = json.loads(out[1])
    assert doc["memories"] == 0
    assert doc["anomalies"] == []
    assert "anomalies (0)" in "\n".join(out[2:])
    assert "quarantine by source" in "\n".join(out[2:])

"""Congruence: EdgeVectorStore (qdrant-edge, Qdrant's engine in-process) and QdrantVectorStore
(qdrant-client) run the same operations on the same 2,000 memories and must agree with each other
and with a numpy brute force.

The qdrant-client adapter runs twice: against a real Qdrant server 1.18.3 (``../shared/bin/qdrant``,
session fixture ``qdrant_url``: payload indexes, the tenant index and server-side BM25 for real,
the production path) and in qdrant-client's ``:memory:`` local mode (request shapes only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from qdrant_client import QdrantClient

from hindsight.errors import ConfigurationError, StoreUnavailableError
from hindsight.stores.vector import MemoryFilter, ScoredRecord, SparseVector, VectorRecord
from hindsight.stores.vector_edge import EdgeVectorStore
from hindsight.stores.vector_qdrant import QdrantVectorStore

pytestmark = [
    pytest.mark.integration,
    # qdrant-client local mode warns once that payload indexes have no effect there.
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant:UserWarning"),
]

DIM = 384
N = 2_000
SCORE_TOL = 1e-5
TIE_TOL = 1e-6
NOW = datetime(2026, 3, 30, 12, 0, tzinfo=UTC)
TENANTS = ("t0", "t1", "t2")
USERS = ("u0", "u1", "u2", "u3", "u4")
TYPES = ("episodic", "semantic", "working")
STATUSES = ("active", "active", "active", "superseded", "expired", "quarantined")
SCOPES = ("global", "agent:a1", "agent:a2")
TAGS = ("health", "travel", "food", "work", "family")
REPO_ROOT = Path(__file__).resolve().parents[2]


VOCABULARY = 60
"""Term ids of the sparse (BM25) vectors: a few of them per memory."""


@dataclass(frozen=True)
class Dataset:
    """``N`` memories: ids, ``(N, DIM)`` float32 unit vectors, payloads, sparse term-count vectors."""

    ids: list[str]
    vectors: npt.NDArray[np.float32]
    payloads: list[dict[str, Any]]
    sparse: list[SparseVector]

    def records(self) -> list[VectorRecord]:
        return [
            VectorRecord(i, v, dict(p), sparse=t)
            for i, v, p, t in zip(self.ids, self.vectors, self.payloads, self.sparse, strict=True)
        ]


def _term_counts(rng: np.random.Generator) -> SparseVector:
    terms = sorted(int(t) for t in rng.choice(VOCABULARY, size=int(rng.integers(3, 9)), replace=False))
    return SparseVector(tuple(terms), tuple(float(rng.integers(1, 4)) for _ in terms))


def _make_dataset() -> Dataset:
    rng = np.random.default_rng(20260330)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    vectors[N - 20 :] = vectors[:20]  # exact duplicates: ties that may swap places
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    payloads: list[dict[str, Any]] = []
    for _ in range(N):
        n_tags = int(rng.integers(0, 3))
        payloads.append(
            {
                "tenant_id": str(rng.choice(TENANTS)),
                "user_id": str(rng.choice(USERS)),
                "agent_id": "a1",
                "scope": str(rng.choice(SCOPES)),
                "type": str(rng.choice(TYPES)),
                "status": str(rng.choice(STATUSES)),
                "session_id": f"s{int(rng.integers(0, 10))}",
                "tags": sorted({str(t) for t in rng.choice(TAGS, size=n_tags, replace=False)}),
                "intent": "preference",
                "content": f"memory {len(payloads)}",
                "importance": round(float(rng.random()), 3),
                "created_ts": (NOW - timedelta(seconds=float(rng.uniform(0, 60 * 86_400)))).timestamp(),
                "last_accessed_ts": NOW.timestamp(),
            }
        )
    ids = [str(uuid.UUID(int=int(rng.integers(1, 2**63)) << 64 | i)) for i in range(N)]
    sparse = [_term_counts(rng) for _ in range(N)]
    return Dataset(ids=ids, vectors=vectors, payloads=payloads, sparse=sparse)


DATA = _make_dataset()

DAY = timedelta(days=1)
FILTERS: list[MemoryFilter] = [
    MemoryFilter("t0"),
    MemoryFilter("t1", user_id="u1"),
    MemoryFilter("t1", user_id="u1", scopes=["global", "agent:a1"]),
    MemoryFilter("t2", types=["semantic"]),
    MemoryFilter("t2", statuses=None),
    MemoryFilter("t0", statuses=["expired", "superseded"]),
    MemoryFilter("t0", session_id="s3", statuses=None),
    MemoryFilter("t1", tags_any=["health"]),
    MemoryFilter("t1", tags_any=["travel", "food"]),
    MemoryFilter("t1", tags_exclude=["health"]),
    MemoryFilter("t2", tags_any=["food"], tags_exclude=["health", "work"]),
    MemoryFilter("t0", created_from=NOW - 7 * DAY),
    MemoryFilter("t0", created_from=NOW - 30 * DAY, created_to=NOW - 7 * DAY),
    MemoryFilter("t2", created_to=NOW - 45 * DAY),
    MemoryFilter(
        "t1",
        user_id="u2",
        scopes=["global"],
        types=["episodic", "semantic"],
        statuses=["active"],
        tags_exclude=["family"],
        created_from=NOW - 50 * DAY,
        created_to=NOW - DAY,
    ),
    MemoryFilter("t0", scopes=[]),  # empty allow-list: nothing
    MemoryFilter("t-unknown"),
    MemoryFilter("t1", user_id="u4", statuses=None, types=["working"]),
]


def _random_filters(count: int) -> list[MemoryFilter]:
    rng = np.random.default_rng(7)
    out = []
    for _ in range(count):
        start = NOW - float(rng.uniform(10, 60)) * DAY
        out.append(
            MemoryFilter(
                str(rng.choice(TENANTS)),
                user_id=str(rng.choice(USERS)) if rng.random() < 0.6 else None,
                scopes=[str(s) for s in rng.choice(SCOPES, size=2, replace=False)]
                if rng.random() < 0.5
                else None,
                types=[str(rng.choice(TYPES))] if rng.random() < 0.4 else None,
                statuses=None if rng.random() < 0.3 else ("active",),
                tags_any=[str(rng.choice(TAGS))] if rng.random() < 0.3 else None,
                tags_exclude=[str(rng.choice(TAGS))] if rng.random() < 0.3 else None,
                created_from=start if rng.random() < 0.4 else None,
                created_to=start + 20 * DAY if rng.random() < 0.3 else None,
            )
        )
    return out


FILTERS += _random_filters(14)


def matches(payload: dict[str, Any], flt: MemoryFilter) -> bool:
    """Reference semantics of ``MemoryFilter`` on one payload (tests only: stores push filters down)."""
    tags = set(payload["tags"])
    checks = [
        payload["tenant_id"] == flt.tenant_id,
        flt.user_id is None or payload["user_id"] == flt.user_id,
        flt.session_id is None or payload["session_id"] == flt.session_id,
        flt.scopes is None or payload["scope"] in flt.scopes,
        flt.types is None or payload["type"] in flt.types,
        flt.statuses is None or payload["status"] in flt.statuses,
        flt.tags_any is None or bool(tags & set(flt.tags_any)),
        not flt.tags_exclude or not tags & set(flt.tags_exclude),
        flt.created_from is None or payload["created_ts"] >= flt.created_from.timestamp(),
        flt.created_to is None or payload["created_ts"] < flt.created_to.timestamp(),
    ]
    return all(checks)


def brute_force(data: Dataset, query: npt.NDArray[np.float32], flt: MemoryFilter) -> list[tuple[str, float]]:
    """Every matching (id, cosine) pair, best first, in float64."""
    scores = data.vectors.astype(np.float64) @ query.astype(np.float64)
    hits = [(data.ids[k], float(scores[k])) for k in range(len(data.ids)) if matches(data.payloads[k], flt)]
    return sorted(hits, key=lambda hit: -hit[1])


def assert_matches_truth(hits: list[ScoredRecord], truth: list[tuple[str, float]], limit: int) -> None:
    """Right length, right scores by rank, and each id is one of those truly tied at its rank."""
    assert len(hits) == min(limit, len(truth))
    assert len({h.id for h in hits}) == len(hits)
    true_score = dict(truth)
    for rank, hit in enumerate(hits):
        assert hit.score == pytest.approx(truth[rank][1], abs=SCORE_TOL)
        assert hit.id in true_score, f"rank {rank}: {hit.id} does not match the filter"
        assert abs(true_score[hit.id] - truth[rank][1]) <= TIE_TOL, f"rank {rank}: {hit.id} out of order"


def assert_same_ranking(a: list[ScoredRecord], b: list[ScoredRecord]) -> None:
    """Same ids in the same order, except that ids tied within ``TIE_TOL`` may swap; same scores."""
    assert len(a) == len(b)
    for hit_a, hit_b in zip(a, b, strict=True):
        assert hit_a.score == pytest.approx(hit_b.score, abs=SCORE_TOL)
    groups: list[list[int]] = []
    for rank, hit in enumerate(a):
        if groups and abs(a[groups[-1][0]].score - hit.score) <= TIE_TOL:
            groups[-1].append(rank)
        else:
            groups.append([rank])
    for group in groups[:-1]:  # the last group may be cut by the limit at a different member
        assert {a[r].id for r in group} == {b[r].id for r in group}


def _payload_of(data: Dataset) -> dict[str, dict[str, Any]]:
    return dict(zip(data.ids, data.payloads, strict=True))


TARGETS = ["server", "local"]
"""Where the qdrant-client adapter's collection lives: a real Qdrant server, or local mode."""


def _client(target: str, request: pytest.FixtureRequest) -> QdrantClient:
    if target == "server":
        return QdrantClient(url=request.getfixturevalue("qdrant_url"), check_compatibility=False)
    return QdrantClient(":memory:")


def _open_pair(
    root: Path, target: str, request: pytest.FixtureRequest
) -> tuple[EdgeVectorStore, QdrantVectorStore, QdrantClient]:
    client = _client(target, request)
    collection = f"memories_{uuid.uuid4().hex[:8]}"
    return EdgeVectorStore(root / "edge", DIM), QdrantVectorStore(client, collection, DIM), client


@pytest.fixture(scope="module", params=TARGETS)
def loaded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[EdgeVectorStore, QdrantVectorStore]]:
    """Both stores holding ``DATA``; read-only tests share them."""
    edge, qdrant, client = _open_pair(tmp_path_factory.mktemp("vectors"), request.param, request)
    for store in (edge, qdrant):
        store.upsert(DATA.records())
    yield edge, qdrant
    edge.close()
    qdrant.close()
    client.close()


@pytest.fixture(params=TARGETS)
def fresh(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[EdgeVectorStore, QdrantVectorStore]]:
    """Both stores holding ``DATA``, for one test that writes."""
    edge, qdrant, client = _open_pair(tmp_path, request.param, request)
    for store in (edge, qdrant):
        store.upsert(DATA.records())
    yield edge, qdrant
    edge.close()
    qdrant.close()
    client.close()


def _queries(flt_index: int) -> list[npt.NDArray[np.float32]]:
    rng = np.random.default_rng(flt_index)
    random_query = rng.standard_normal(DIM).astype(np.float32)
    random_query /= np.linalg.norm(random_query)
    stored = DATA.vectors[int(rng.integers(0, 20))]  # a stored (and duplicated) vector: exact ties at 1.0
    return [random_query, stored]


@pytest.mark.parametrize("flt_index", range(len(FILTERS)))
def test_filtered_search_agrees_across_adapters_and_with_brute_force(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore], flt_index: int
) -> None:
    edge, qdrant = loaded
    flt = FILTERS[flt_index]
    payloads = _payload_of(DATA)
    for query in _queries(flt_index):
        truth = brute_force(DATA, query, flt)
        for limit in (10, 50):
            hits_edge, hits_qdrant = edge.search(query, flt, limit), qdrant.search(query, flt, limit)
            assert_matches_truth(hits_edge, truth, limit)
            assert_matches_truth(hits_qdrant, truth, limit)
            assert_same_ranking(hits_edge, hits_qdrant)
            for hit in hits_edge + hits_qdrant:
                assert hit.payload == payloads[hit.id]


@pytest.mark.parametrize("flt_index", [0, 2, 10, 14, 15])
def test_search_batch_equals_one_search_per_row(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore], flt_index: int
) -> None:
    flt = FILTERS[flt_index]
    queries = np.stack([*_queries(flt_index), DATA.vectors[500]])
    per_store = []
    for store in loaded:
        batch = store.search_batch(queries, flt, 10)
        assert len(batch) == len(queries)
        for row, hits in zip(queries, batch, strict=True):
            assert_same_ranking(hits, store.search(row, flt, 10))
        per_store.append(batch)
    for hits_edge, hits_qdrant in zip(*per_store, strict=True):
        assert_same_ranking(hits_edge, hits_qdrant)
    assert loaded[0].search_batch(np.zeros((0, DIM), np.float32), flt, 10) == []


def test_counts_agree_for_every_filter(loaded: tuple[EdgeVectorStore, QdrantVectorStore]) -> None:
    edge, qdrant = loaded
    assert edge.count() == qdrant.count() == N
    assert edge.count(None) == N
    for flt in FILTERS:
        expected = sum(matches(p, flt) for p in DATA.payloads)
        assert edge.count(flt) == qdrant.count(flt) == expected, flt


@pytest.mark.parametrize("key", ["status", "type", "user_id"])
def test_facets_count_each_value_like_the_payloads(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore], key: str
) -> None:
    for flt in [None, *FILTERS]:
        expected = Counter(p[key] for p in DATA.payloads if flt is None or matches(p, flt))
        for store in loaded:
            assert store.facet(flt, key) == dict(expected), (store, flt)
    assert (
        loaded[0].facet(MemoryFilter("t0"), "status", limit=1)
        == loaded[1].facet(MemoryFilter("t0"), "status", limit=1)
        == {"active": sum(matches(p, MemoryFilter("t0")) for p in DATA.payloads)}
    )


@pytest.mark.parametrize(
    "flt", [None, MemoryFilter("t1", statuses=None), MemoryFilter("t2", user_id="u3", types=["episodic"])]
)
@pytest.mark.parametrize("descending", [True, False])
def test_ordered_reads_points_in_created_order_with_their_values(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore], flt: MemoryFilter | None, descending: bool
) -> None:
    pairs = zip(DATA.ids, DATA.payloads, strict=True)
    truth = sorted(
        ((p["created_ts"], i) for i, p in pairs if flt is None or matches(p, flt)), reverse=descending
    )
    per_store = []
    for store in loaded:
        every = store.ordered(flt, "created_ts", N, descending=descending)
        assert [r.value for r in every] == pytest.approx([t for t, _ in truth])
        assert sorted(r.id for r in every) == sorted(i for _, i in truth)
        assert all(r.payload == {} for r in every)
        first = store.ordered(flt, "created_ts", 7, descending=descending, fields=["status", "content"])
        assert [r.id for r in first] == [r.id for r in every[:7]]
        by_id = dict(zip(DATA.ids, DATA.payloads, strict=True))
        assert all(r.payload == {k: by_id[r.id][k] for k in ("status", "content")} for r in first)
        whole = store.ordered(flt, "created_ts", 3, descending=descending, fields=None)
        assert all(r.payload == by_id[r.id] for r in whole)
        per_store.append([r.id for r in every])
    assert per_store[0] == per_store[1]


def test_facet_and_ordered_refuse_fields_without_the_right_index(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore],
) -> None:
    for store in loaded:
        with pytest.raises(ValueError, match="keyword-indexed"):
            store.facet(None, "created_ts")
        with pytest.raises(ValueError, match="keyword-indexed"):
            store.facet(None, "content")
        with pytest.raises(ValueError, match="float-indexed"):
            store.ordered(None, "status", 10)
        with pytest.raises(ValueError, match="limit"):
            store.ordered(None, "created_ts", 0)


@pytest.mark.parametrize("flt_index", [0, 1, 7, 10, 15, 16])
def test_sparse_search_ranks_alike_in_both_engines(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore], flt_index: int
) -> None:
    """BM25 (the engine's IDF modifier over term counts) ranks the same in Qdrant's engine in
    process and in the client's target, and only returns matching memories holding a query term."""
    edge, qdrant = loaded
    flt = FILTERS[flt_index]
    rng = np.random.default_rng(100 + flt_index)
    payloads, terms_of = _payload_of(DATA), dict(zip(DATA.ids, DATA.sparse, strict=True))
    for size in (1, 3):
        terms = sorted(int(t) for t in rng.choice(VOCABULARY, size=size, replace=False))
        query = SparseVector(tuple(terms), tuple(1.0 for _ in terms))
        hits_edge, hits_qdrant = edge.search_sparse(query, flt, 20), qdrant.search_sparse(query, flt, 20)
        candidates = [
            i for i in DATA.ids if matches(payloads[i], flt) and set(terms_of[i].indices) & set(terms)
        ]
        assert len(hits_edge) == min(20, len(candidates))
        for hit in hits_edge + hits_qdrant:
            assert matches(hit.payload, flt)
            assert set(terms_of[hit.id].indices) & set(terms)
        assert_same_ranking(hits_edge, hits_qdrant)
    assert (
        edge.search_sparse(SparseVector((), ()), flt, 5)
        == qdrant.search_sparse(SparseVector((), ()), flt, 5)
        == []
    )


def test_retrieve_returns_the_same_records_in_the_order_asked(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore],
) -> None:
    missing = str(uuid.uuid4())
    wanted = [DATA.ids[7], missing, DATA.ids[3], DATA.ids[7].upper(), DATA.ids[1999]]
    payloads = _payload_of(DATA)
    results = [store.retrieve(wanted, with_vectors=True) for store in loaded]
    for records in results:
        assert [r.id for r in records] == [DATA.ids[7], DATA.ids[3], DATA.ids[1999]]
        for record, k in zip(records, (7, 3, 1999), strict=True):
            assert record.payload == payloads[record.id]
            assert record.vector is not None
            assert record.vector.dtype == np.float32
            np.testing.assert_allclose(record.vector, DATA.vectors[k], atol=1e-6)
            assert record.sparse == DATA.sparse[k]
    assert all(r.vector is None for store in loaded for r in store.retrieve(DATA.ids[:3]))
    assert all(store.retrieve([]) == [] for store in loaded)


@pytest.mark.parametrize("flt_index", [0, 10, 15])
def test_search_with_vectors_returns_each_hits_stored_vector_and_the_same_ranking(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore], flt_index: int
) -> None:
    flt = FILTERS[flt_index]
    index_of = {item: k for k, item in enumerate(DATA.ids)}
    for query in _queries(flt_index):
        for store in loaded:
            plain = store.search(query, flt, 20)
            with_vectors = store.search(query, flt, 20, with_vectors=True)
            assert_same_ranking(with_vectors, plain)
            assert all(hit.vector is None for hit in plain)
            for hit in with_vectors:
                assert hit.vector is not None
                assert hit.vector.dtype == np.float32
                np.testing.assert_allclose(hit.vector, DATA.vectors[index_of[hit.id]], atol=1e-6)
                assert float(np.dot(hit.vector, query)) == pytest.approx(hit.score, abs=SCORE_TOL)


def test_dense_vectors_equal_the_retrieved_vectors_and_skip_missing_ids(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore],
) -> None:
    missing = str(uuid.uuid4())
    wanted = [DATA.ids[11], missing, DATA.ids[1500]]
    for store in loaded:
        found = store.dense_vectors(wanted)
        assert set(found) == {DATA.ids[11], DATA.ids[1500]}
        np.testing.assert_allclose(found[DATA.ids[11]], DATA.vectors[11], atol=1e-6)
        np.testing.assert_allclose(found[DATA.ids[1500]], DATA.vectors[1500], atol=1e-6)
        assert store.dense_vectors([]) == {}


@pytest.mark.parametrize("flt", [None, MemoryFilter("t1", statuses=None), MemoryFilter("t2", user_id="u3")])
def test_scroll_visits_every_matching_id_exactly_once_in_the_same_pages(
    loaded: tuple[EdgeVectorStore, QdrantVectorStore], flt: MemoryFilter | None
) -> None:
    expected = {i for i, p in zip(DATA.ids, DATA.payloads, strict=True) if flt is None or matches(p, flt)}
    pages_per_store = []
    for store in loaded:
        pages: list[list[str]] = []
        offset: str | None = None
        while True:
            page, offset = store.scroll(flt, limit=97, offset=offset)
            pages.append([r.id for r in page])
            assert all(r.vector is None for r in page)
            if offset is None:
                break
        seen = [i for page_ids in pages for i in page_ids]
        assert len(seen) == len(set(seen))
        assert set(seen) == expected
        pages_per_store.append(pages)
    assert pages_per_store[0] == pages_per_store[1]


def test_set_payload_merges_keys_and_search_sees_the_new_value(
    fresh: tuple[EdgeVectorStore, QdrantVectorStore],
) -> None:
    flt = MemoryFilter("t1", user_id="u1")
    query = DATA.vectors[11]
    top = [h.id for h in fresh[0].search(query, flt, 5)]
    missing = str(uuid.uuid4())
    for store in fresh:
        store.set_payload([*top[:3], missing], {"status": "expired", "expired_reason": "decay"})
    after = [[h.id for h in store.search(query, flt, 5)] for store in fresh]
    assert after[0] == after[1]
    assert not set(after[0]) & set(top[:3])
    expired = MemoryFilter("t1", user_id="u1", statuses=["expired"])
    for store in fresh:
        assert set(top[:3]) <= {h.id for h in store.search(query, expired, 50)}
        record = store.retrieve([top[0]])[0]
        assert record.payload["expired_reason"] == "decay"
        assert record.payload["content"] == _payload_of(DATA)[top[0]]["content"]  # merged, not replaced
        assert store.retrieve([missing]) == []
    assert fresh[0].count(expired) == fresh[1].count(expired)


def test_delete_removes_points_everywhere(fresh: tuple[EdgeVectorStore, QdrantVectorStore]) -> None:
    doomed = DATA.ids[:50]
    for store in fresh:
        store.delete([*doomed, str(uuid.uuid4())])
        assert store.count() == N - 50
        assert store.retrieve(doomed) == []
    remaining = Dataset(DATA.ids[50:], DATA.vectors[50:], DATA.payloads[50:], DATA.sparse[50:])
    for flt_index in (0, 1, 4):
        query = DATA.vectors[5]  # a deleted point's vector
        truth = brute_force(remaining, query, FILTERS[flt_index])
        hits = [store.search(query, FILTERS[flt_index], 20) for store in fresh]
        for store_hits in hits:
            assert_matches_truth(store_hits, truth, 20)
        assert_same_ranking(*hits)


def test_upserting_the_same_id_twice_keeps_one_record(
    fresh: tuple[EdgeVectorStore, QdrantVectorStore],
) -> None:
    target = DATA.ids[42]
    replacement = DATA.vectors[43]
    for store in fresh:
        store.upsert([VectorRecord(target, DATA.vectors[42], dict(DATA.payloads[42]))])  # redelivery
        assert store.count() == N
        store.upsert(
            [
                VectorRecord(target, DATA.vectors[42], {**DATA.payloads[42], "version": 1}),
                VectorRecord(target, replacement, {**DATA.payloads[42], "version": 2}),
            ]
        )
        assert store.count() == N
        (record,) = store.retrieve([target], with_vectors=True)
        assert record.payload["version"] == 2
        assert record.vector is not None
        np.testing.assert_allclose(record.vector, replacement, atol=1e-6)


def test_edge_store_keeps_everything_across_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "edge"
    store = EdgeVectorStore(path, DIM)
    store.upsert(DATA.records())
    store.set_payload(DATA.ids[:10], {"status": "expired"})
    store.delete(DATA.ids[10:20])
    flt = MemoryFilter("t1", user_id="u1")
    before = store.search(DATA.vectors[30], flt, 20)
    store.close()

    reopened = EdgeVectorStore(path, DIM)
    try:
        assert reopened.count() == N - 10
        expired = [k < 10 or p["status"] == "expired" for k, p in enumerate(DATA.payloads)]
        expected = sum(
            expired[k] and p["tenant_id"] == "t0" for k, p in enumerate(DATA.payloads) if not 10 <= k < 20
        )
        assert reopened.count(MemoryFilter("t0", statuses=["expired"])) == expected
        assert reopened.retrieve(DATA.ids[10:20]) == []
        assert_same_ranking(reopened.search(DATA.vectors[30], flt, 20), before)
    finally:
        reopened.close()


def test_edge_store_keeps_acknowledged_writes_when_the_process_dies(tmp_path: Path) -> None:
    path = tmp_path / "edge"
    ids = [str(uuid.UUID(int=k + 1)) for k in range(300)]
    script = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        import numpy as np
        from hindsight.stores.vector import VectorRecord
        from hindsight.stores.vector_edge import EdgeVectorStore

        ids = {ids!r}
        store = EdgeVectorStore(Path({str(path)!r}), 8)
        vectors = np.eye(8, dtype=np.float32)
        store.upsert([VectorRecord(i, vectors[k % 8], {{"tenant_id": "t1", "status": "active"}})
                      for k, i in enumerate(ids)])
        store.set_payload(ids[:5], {{"status": "expired"}})
        os._exit(0)  # no close, no flush: a crash right after the acknowledged writes
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, env=env)

    store = EdgeVectorStore(path, 8)
    try:
        assert store.count() == 300
        assert store.count(MemoryFilter("t1")) == 295
    finally:
        store.close()


def test_closed_stores_refuse_calls_and_a_second_handle_is_refused(tmp_path: Path) -> None:
    edge = EdgeVectorStore(tmp_path / "edge", DIM)
    with pytest.raises(StoreUnavailableError, match=r"is open elsewhere.*--data-dir"):
        EdgeVectorStore(tmp_path / "edge", DIM)
    edge.upsert(DATA.records()[:3])
    assert [r.id for r in edge.retrieve(DATA.ids[:3])] == DATA.ids[:3]
    edge.close()
    edge.close()
    qdrant = QdrantVectorStore(QdrantClient(":memory:"), "memories", DIM)
    qdrant.close()
    for store in (edge, qdrant):
        with pytest.raises(StoreUnavailableError, match="closed"):
            store.count()


def test_reopening_with_another_dimension_is_a_configuration_error(tmp_path: Path) -> None:
    EdgeVectorStore(tmp_path / "edge", DIM).close()
    with pytest.raises(ConfigurationError, match="dim=128"):
        EdgeVectorStore(tmp_path / "edge", 128)
    client = QdrantClient(":memory:")
    QdrantVectorStore(client, "memories", DIM)
    with pytest.raises(ConfigurationError, match="size 128"):
        QdrantVectorStore(client, "memories", 128)

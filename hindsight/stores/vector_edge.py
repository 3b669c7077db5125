"""``VectorStore`` on qdrant-edge 0.9.0: Qdrant's Rust engine in-process, on disk.

The embedded default and the tests use it (INFRA.md, Qdrant). One shard per directory: a named dense
vector (``dense``, ``dim`` float32 components, cosine distance) and a named sparse vector (``bm25``,
term weights with the engine's IDF modifier, so sparse search is BM25), plus a payload index for every
field of ``PAYLOAD_INDEXES`` (``tenant_id`` as Qdrant's tenant keyword). Only one handle may hold a
directory at a time: the adapter takes an OS lock on ``<path>.lock`` (``flock``) before it opens
anything, and a second open, from another process or this one, raises ``StoreUnavailableError``
without touching the shard's files (the engine's own write-ahead-log lock comes too late: its
``load`` truncates the running handle's tracker journals first). Share one ``EdgeVectorStore`` per
process.

Durability: every update is written to the engine's WAL before the call returns, which survives a
crash of the process. With ``flush_on_write=True`` (the default) each write also calls the engine's
``flush()`` before returning, so it survives an OS crash or power loss too; that costs about
15-20 ms per write call, more under disk contention (measured on 2 busy cores, 10k points of 384-d
in 256-point batches: ~6k points/s with the flush, 10-13k points/s without). Bulk loads can pass
``flush_on_write=False`` and call ``flush()`` at the end.

Search is exact (brute force over plain segments, narrowed by the payload indexes) until
``optimize()`` builds HNSW; after that it is approximate, like any Qdrant collection. ``optimize()``
is slow (3-7 s at 10k points of 384-d, minutes at 100k) and holds the GIL for its whole run, so
even from ``asyncio.to_thread`` it freezes the event loop. Never call it on the write path: a maintenance task
calls it at startup before consuming, or in a quiet window. Exact search stays fast enough without
it for a laptop-sized store (filtered search ~0.3 ms p50 at 10k points). The other engine calls
also hold the GIL, for their own (millisecond) duration.

Errors: qdrant-edge raises bare ``Exception`` for every engine failure (I/O, lock held, closed
shard, incompatible config). This adapter translates exactly that class: into ``ConfigurationError``
when an existing shard has another dimension, otherwise into ``StoreUnavailableError``. Every other
exception type (``TypeError`` for a non-JSON payload value, ``ValueError``) propagates unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from hindsight.errors import ConfigurationError, StoreUnavailableError
from hindsight.stores.dirlock import DirectoryLock
from hindsight.stores.vector import (
    DENSE_VECTOR,
    PAYLOAD_INDEXES,
    SPARSE_VECTOR,
    TENANT_FIELD,
    AnyOf,
    Condition,
    FilterSpec,
    FloatRange,
    FloatVector,
    MemoryFilter,
    OrderedRecord,
    PayloadIndexKind,
    ScoredRecord,
    SparseVector,
    VectorRecord,
    canonical_id,
    check_dim,
    check_indexed,
    check_limit,
    check_matrix,
    check_vector,
    compile_filter,
    dense_by_id,
    named_dense,
    unique_ids,
)

_CONFIG_FILE = "edge_config.json"
"""Written by ``EdgeShard.create``; its presence means the directory already holds a shard."""


@contextmanager
def _engine_errors(operation: str) -> Iterator[None]:
    """Translate qdrant-edge's bare ``Exception`` into ``StoreUnavailableError``; re-raise anything else."""
    try:
        yield
    except Exception as exc:  # qdrant-edge's only error class is Exception itself; subclasses re-raise
        if type(exc) is not Exception:
            raise
        raise StoreUnavailableError(f"qdrant-edge {operation} failed: {exc}") from exc


def _condition(condition: Condition) -> qe.FieldCondition:
    if isinstance(condition, AnyOf):
        if len(condition.values) == 1:
            return qe.FieldCondition(condition.key, match=qe.MatchValue(condition.values[0]))
        return qe.FieldCondition(condition.key, match=qe.MatchAny(list(condition.values)))
    if isinstance(condition, FloatRange):
        return qe.FieldCondition(condition.key, range=qe.RangeFloat(gte=condition.gte, lt=condition.lt))
    raise TypeError(f"unknown filter condition {condition!r}")


def edge_filter(spec: FilterSpec) -> qe.Filter:
    """``spec`` as a qdrant-edge ``Filter`` (``must`` / ``must_not`` field conditions)."""
    return qe.Filter(
        must=[_condition(c) for c in spec.must] or None,
        must_not=[_condition(c) for c in spec.must_not] or None,
    )


def _optional_filter(flt: MemoryFilter | None) -> qe.Filter | None:
    return None if flt is None else edge_filter(compile_filter(flt))


def _index_schema(field: str, kind: PayloadIndexKind) -> qe.PayloadSchemaType | qe.KeywordIndexParams:
    if field == TENANT_FIELD:
        return qe.KeywordIndexParams(is_tenant=True)
    if kind is PayloadIndexKind.KEYWORD:
        return qe.PayloadSchemaType.Keyword
    return qe.PayloadSchemaType.Float


class EdgeVectorStore:
    """``VectorStore`` on a qdrant-edge shard in directory ``path`` (created if missing).

    Args:
        path: the shard directory; created with its parents when it holds no shard yet.
        dim: vector dimension ``d`` (e.g. 384); must match an existing shard's.
        flush_on_write: flush the engine to disk at the end of every write call (see module doc).

    Raises:
        ValueError: ``dim`` < 1.
        ConfigurationError: the shard at ``path`` has another vector configuration.
        StoreUnavailableError: the shard cannot be opened (another handle holds it, I/O error).
    """

    def __init__(self, path: Path, dim: int, *, flush_on_write: bool = True) -> None:
        self.dim = check_dim(dim)
        self.path = Path(path)
        self._flush_on_write = flush_on_write
        self._closed = False
        config = qe.EdgeConfig(
            vectors={DENSE_VECTOR: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        self._lock = DirectoryLock(
            self.path.with_name(f"{self.path.name}.lock"),
            f"vector store {self.path}",
            "one handle per directory (e.g. another 'hindsight up'): stop it, or use another data "
            "directory (--data-dir / HINDSIGHT_DATA_DIR)",
        ).acquire()
        try:
            if (self.path / _CONFIG_FILE).exists():
                self._shard = self._load(config)
            else:
                with _engine_errors(f"create {self.path}"):
                    self._shard = qe.EdgeShard.create(str(self.path), config)
            self._ensure_indexes()
        except BaseException:
            self._lock.release()
            raise

    def _load(self, config: qe.EdgeConfig) -> qe.EdgeShard:
        try:
            with _engine_errors(f"load {self.path}"):
                return qe.EdgeShard.load(str(self.path), config)
        except StoreUnavailableError as exc:
            if "incompatible" in str(exc):
                raise ConfigurationError(
                    f"vector store {self.path} does not hold dim={self.dim}: {exc}"
                ) from exc
            if "WouldBlock" in str(exc):  # the write-ahead log's file lock is held
                raise StoreUnavailableError(
                    f"vector store {self.path} is open elsewhere (one handle per directory,"
                    " e.g. another 'hindsight up'): stop it, or use another data directory"
                    " (--data-dir / HINDSIGHT_DATA_DIR)"
                ) from exc
            raise

    def _ensure_indexes(self) -> None:
        with _engine_errors("create payload indexes"):
            existing = self._shard.info().payload_schema
            for field, kind in PAYLOAD_INDEXES.items():
                if field not in existing:
                    self._shard.update(
                        qe.UpdateOperation.create_field_index(field, _index_schema(field, kind))
                    )
            self._shard.flush()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailableError(f"vector store {self.path} is closed")

    def _after_write(self) -> None:
        if self._flush_on_write:
            self._shard.flush()

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace points by id; each record needs a ``(d,)`` vector.

        Raises:
            ValueError: a record has no vector, a wrong shape, or NaN components.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        points = []
        for record in records:
            if record.vector is None:
                raise ValueError(f"record {record.id} has no vector; upsert needs one")
            vectors: dict[str, Any] = {DENSE_VECTOR: check_vector(record.vector, self.dim).tolist()}
            if record.sparse:
                vectors[SPARSE_VECTOR] = qe.SparseVector(
                    list(record.sparse.indices), list(record.sparse.values)
                )
            points.append(qe.Point(record.id, vectors, record.payload))
        if not points:
            return
        with _engine_errors("upsert"):
            self._shard.update(qe.UpdateOperation.upsert_points(points))
            self._after_write()

    def _request(
        self, vector: FloatVector, flt: qe.Filter, limit: int, with_vectors: bool = False
    ) -> qe.QueryRequest:
        return qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector.tolist(), using=DENSE_VECTOR),
            filter=flt,
            with_payload=True,
            with_vector=[DENSE_VECTOR] if with_vectors else False,
        )

    @classmethod
    def _hits(cls, points: list[qe.ScoredPoint]) -> list[ScoredRecord]:
        return [
            ScoredRecord(
                id=str(p.id), score=float(p.score), payload=p.payload or {}, vector=named_dense(p.vector)
            )
            for p in points
        ]

    def search(
        self, vector: FloatVector, flt: MemoryFilter, limit: int, *, with_vectors: bool = False
    ) -> list[ScoredRecord]:
        """The ``limit`` points matching ``flt`` most similar to ``vector`` ``(d,)`` (cosine), best first;
        with ``with_vectors`` each hit carries its ``(d,)`` float32 vector.

        Raises:
            ValueError: wrong vector shape or ``limit`` < 1.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        request = self._request(
            check_vector(vector, self.dim), edge_filter(compile_filter(flt)), check_limit(limit), with_vectors
        )
        with _engine_errors("search"):
            return self._hits(self._shard.query(request))

    def search_batch(self, vectors: FloatVector, flt: MemoryFilter, limit: int) -> list[list[ScoredRecord]]:
        """``search`` for each row of ``vectors`` ``(n, d)`` as one engine batch; one list per row.

        Raises:
            ValueError: wrong matrix shape or ``limit`` < 1.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        matrix = check_matrix(vectors, self.dim)
        check_limit(limit)
        if len(matrix) == 0:
            return []
        query_filter = edge_filter(compile_filter(flt))
        batch = qe.QueryBatchRequest([self._request(row, query_filter, limit) for row in matrix])
        with _engine_errors("search batch"):
            return [self._hits(points) for points in self._shard.query_batch(batch)]

    def search_sparse(self, query: SparseVector, flt: MemoryFilter, limit: int) -> list[ScoredRecord]:
        """The ``limit`` points matching ``flt`` with the highest BM25 score for ``query``, best first.

        Raises:
            ValueError: ``limit`` < 1.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        if not query:
            return []
        request = qe.QueryRequest(
            limit=check_limit(limit),
            query=qe.Query.Nearest(
                qe.SparseVector(list(query.indices), list(query.values)), using=SPARSE_VECTOR
            ),
            filter=edge_filter(compile_filter(flt)),
            with_payload=True,
            with_vector=False,
        )
        with _engine_errors("sparse search"):
            return self._hits(self._shard.query(request))

    def retrieve(self, ids: Sequence[str], with_vectors: bool = False) -> list[VectorRecord]:
        """The points with these ids, in the order asked; missing ids are skipped.

        Returned vectors are ``(d,)`` float32, L2-normalised by the engine (cosine storage).

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted:
            return []
        with _engine_errors("retrieve"):
            found = self._shard.retrieve(list(wanted), True, with_vectors)
        by_id = {str(r.id): self._record(r, with_vectors) for r in found}
        return [by_id[i] for i in wanted if i in by_id]

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``{id: (d,) float32}`` dense vectors of these points without their payloads; missing ids
        are absent.

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted:
            return {}
        with _engine_errors("retrieve vectors"):
            found = self._shard.retrieve(list(wanted), False, [DENSE_VECTOR])
        return dense_by_id(found)

    @staticmethod
    def _record(found: qe.Record, with_vectors: bool) -> VectorRecord:
        vectors = found.vector if with_vectors and isinstance(found.vector, dict) else {}
        sparse = vectors.get(SPARSE_VECTOR)
        return VectorRecord(
            id=str(found.id),
            vector=named_dense(vectors),
            payload=found.payload or {},
            sparse=SparseVector(tuple(sparse.indices), tuple(sparse.values))
            if isinstance(sparse, qe.SparseVector)
            else None,
        )

    def set_payload(self, ids: Sequence[str], values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the payload of the existing points among ``ids``; missing ids are skipped.

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted or not values:
            return
        # By filter, not by id list: the id-list form fails the whole call on one missing id.
        selector = qe.Filter(must=[qe.HasIdCondition(set(wanted))])
        with _engine_errors("set payload"):
            self._shard.update(qe.UpdateOperation.set_payload_by_filter(selector, dict(values)))
            self._after_write()

    def scroll(
        self,
        flt: MemoryFilter | None,
        limit: int,
        offset: str | None = None,
        *,
        fields: Sequence[str] | None = None,
    ) -> tuple[list[VectorRecord], str | None]:
        """One page of up to ``limit`` points matching ``flt`` (``None``: all tenants), by id, from
        ``offset`` (inclusive); returns the page (without vectors) and the next offset or ``None``.
        ``fields`` limits each payload to those keys (much cheaper for wide payloads).

        Raises:
            ValueError: ``limit`` < 1 or ``offset`` is not a UUID string.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        request = qe.ScrollRequest(
            offset=None if offset is None else canonical_id(offset),
            limit=check_limit(limit),
            filter=_optional_filter(flt),
            with_payload=True if fields is None else qe.PayloadSelector.Include(list(fields)),
            with_vector=False,
        )
        with _engine_errors("scroll"):
            records, next_offset = self._shard.scroll(request)
        page = [VectorRecord(id=str(r.id), vector=None, payload=r.payload or {}) for r in records]
        return page, None if next_offset is None else str(next_offset)

    def count(self, flt: MemoryFilter | None = None) -> int:
        """Exact number of points matching ``flt`` (``None``: every point).

        Raises:
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        with _engine_errors("count"):
            return self._shard.count(qe.CountRequest(exact=True, filter=_optional_filter(flt)))

    def facet(self, flt: MemoryFilter | None, key: str, limit: int = 100) -> dict[str, int]:
        """``{value: n}`` of the keyword field ``key`` over the points matching ``flt`` (exact, from the
        payload index), the ``limit`` most frequent values.

        Raises:
            ValueError: ``key`` is not keyword-indexed, or ``limit`` < 1.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        request = qe.FacetRequest(
            check_indexed(key, PayloadIndexKind.KEYWORD),
            limit=check_limit(limit),
            exact=True,
            filter=_optional_filter(flt),
        )
        with _engine_errors("facet"):
            response = self._shard.facet(request)
        return {str(hit.value): int(hit.count) for hit in response.hits}

    def ordered(
        self,
        flt: MemoryFilter | None,
        key: str,
        limit: int,
        *,
        descending: bool = True,
        fields: Sequence[str] | None = (),
    ) -> list[OrderedRecord]:
        """The first ``limit`` points matching ``flt`` ordered by the float field ``key`` (its range
        index), each with its value; ``fields``: payload keys (``()`` none, ``None`` all).

        Raises:
            ValueError: ``key`` is not float-indexed, or ``limit`` < 1.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        direction = qe.Direction.Desc if descending else qe.Direction.Asc
        payload: bool | qe.PayloadSelector = (
            True if fields is None else bool(fields) and qe.PayloadSelector.Include(list(fields))
        )
        request = qe.ScrollRequest(
            limit=check_limit(limit),
            filter=_optional_filter(flt),
            with_payload=payload,
            with_vector=False,
            order_by=qe.OrderBy(check_indexed(key, PayloadIndexKind.FLOAT), direction),
        )
        with _engine_errors("ordered scroll"):
            records, _ = self._shard.scroll(request)
        return [OrderedRecord(str(r.id), float(r.order_value or 0.0), r.payload or {}) for r in records]

    def delete(self, ids: Sequence[str]) -> None:
        """Delete these points; missing ids are ignored.

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted:
            return
        with _engine_errors("delete"):
            self._shard.update(qe.UpdateOperation.delete_points(list(wanted)))
            self._after_write()

    def flush(self) -> None:
        """Flush the engine (segments and WAL) to disk; for callers that write with ``flush_on_write=False``.

        Raises:
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        with _engine_errors("flush"):
            self._shard.flush()

    def optimize(self) -> bool:
        """Run the engine's segment optimizers (HNSW build, vacuum) until none is planned.

        Slow and synchronous, holding the GIL throughout (3-7 s at 10k points of 384-d on 2 cores,
        minutes at 100k): call it from a maintenance task at startup or in a quiet window, never on
        the write path. After it, search is approximate (HNSW). Returns True if anything changed.

        Raises:
            StoreUnavailableError: the engine failed or the store is closed.
        """
        self._check_open()
        with _engine_errors("optimize"):
            return self._shard.optimize()

    def close(self) -> None:
        """Flush and release the shard (and its directory lock); closing twice is a no-op.

        Raises:
            StoreUnavailableError: the final flush or close failed.
        """
        if self._closed:
            return
        self._closed = True
        try:
            with _engine_errors("close"):
                try:
                    self._shard.flush()
                finally:
                    self._shard.close()
        finally:
            self._lock.release()

"""``VectorStore`` on qdrant-client 1.20.0: a Qdrant server by URL in production.

The caller creates the client (``QdrantClient(url=..., api_key=...)`` for a server; ``":memory:"`` or
``path=...`` for qdrant-client's local mode) and owns it: ``close()`` here does not close it. Local
mode is pure-Python brute force (INFRA.md): use it to check request shapes, never as the embedded
store (that is ``hindsight.stores.vector_edge``). In local mode qdrant-client warns once per process
that payload indexes have no effect (``UserWarning``).

The constructor creates the collection when it is missing (a named dense vector ``dense`` of ``dim``
components under cosine distance and a named sparse vector ``bm25`` with the IDF modifier, so sparse
search is BM25 computed by the server) and every missing payload index of ``PAYLOAD_INDEXES``
(``tenant_id`` as Qdrant's tenant keyword). Writes pass ``wait=True``: they return once the server
has applied them and written its WAL.

Errors: a server that cannot be reached, times out or answers 5xx / 408 raises
``StoreUnavailableError``; 429 raises ``BackpressureError`` with the server's ``retry_after``. Other
4xx answers (a bug on our side) propagate as qdrant-client's ``UnexpectedResponse``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import grpc  # type: ignore[import-untyped]
import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from hindsight.errors import BackpressureError, ConfigurationError, StoreUnavailableError
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

_TRANSIENT_HTTP = frozenset({408, 429, 500, 502, 503, 504})
_TRANSIENT_GRPC = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
    }
)
_CONFLICT = 409


@contextmanager
def _client_errors(operation: str) -> Iterator[None]:
    """Translate qdrant-client's transport and server errors into Hindsight's retryable errors."""
    try:
        yield
    except ResourceExhaustedResponse as exc:
        raise BackpressureError(f"qdrant {operation}: {exc}", retry_after=float(exc.retry_after_s)) from exc
    except UnexpectedResponse as exc:
        if exc.status_code is not None and exc.status_code not in _TRANSIENT_HTTP:
            raise
        raise StoreUnavailableError(f"qdrant {operation} failed: {exc}") from exc
    except ResponseHandlingException as exc:
        raise StoreUnavailableError(f"qdrant {operation} failed: {exc.source!r}") from exc
    except grpc.RpcError as exc:
        if not isinstance(exc, grpc.Call) or exc.code() not in _TRANSIENT_GRPC:
            raise
        raise StoreUnavailableError(f"qdrant {operation} failed: {exc.code()} {exc.details()}") from exc


def _condition(condition: Condition) -> models.FieldCondition:
    if isinstance(condition, AnyOf):
        if len(condition.values) == 1:
            return models.FieldCondition(
                key=condition.key, match=models.MatchValue(value=condition.values[0])
            )
        return models.FieldCondition(key=condition.key, match=models.MatchAny(any=list(condition.values)))
    if isinstance(condition, FloatRange):
        return models.FieldCondition(
            key=condition.key, range=models.Range(gte=condition.gte, lt=condition.lt)
        )
    raise TypeError(f"unknown filter condition {condition!r}")


def qdrant_filter(spec: FilterSpec) -> models.Filter:
    """``spec`` as a qdrant-client ``Filter`` (``must`` / ``must_not`` field conditions)."""
    must: list[models.Condition] = [_condition(c) for c in spec.must]
    must_not: list[models.Condition] = [_condition(c) for c in spec.must_not]
    return models.Filter(must=must or None, must_not=must_not or None)


def _optional_filter(flt: MemoryFilter | None) -> models.Filter | None:
    return None if flt is None else qdrant_filter(compile_filter(flt))


def _index_schema(field: str, kind: PayloadIndexKind) -> models.PayloadSchemaType | models.KeywordIndexParams:
    if field == TENANT_FIELD:
        return models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
    if kind is PayloadIndexKind.KEYWORD:
        return models.PayloadSchemaType.KEYWORD
    return models.PayloadSchemaType.FLOAT


def _payload(payload: dict[str, Any] | None) -> dict[str, Any]:
    return {} if payload is None else payload


class QdrantVectorStore:
    """``VectorStore`` on collection ``collection`` of a Qdrant reached through ``client``.

    Args:
        client: a qdrant-client owned by the caller (server URL, ``":memory:"`` or a local path).
        collection: collection name; created with cosine distance when missing.
        dim: vector dimension ``d`` (e.g. 384); must match an existing collection's.
        upsert_batch_size: points per upsert request (keeps requests far below the server's 32 MB cap).

    Raises:
        ValueError: ``dim`` or ``upsert_batch_size`` < 1.
        ConfigurationError: the existing collection has another vector size or distance, or named vectors.
        StoreUnavailableError: the server cannot be reached.
    """

    def __init__(
        self, client: QdrantClient, collection: str, dim: int, *, upsert_batch_size: int = 256
    ) -> None:
        self.dim = check_dim(dim)
        self.collection = collection
        self._client = client
        self._batch = check_limit(upsert_batch_size)
        self._closed = False
        with _client_errors(f"open collection {collection}"):
            self._ensure_collection()

    def _ensure_collection(self) -> None:
        if not self._client.collection_exists(self.collection):
            try:
                self._client.create_collection(
                    self.collection,
                    vectors_config={
                        DENSE_VECTOR: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)
                    },
                    sparse_vectors_config={
                        SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
                    },
                )
            except UnexpectedResponse as exc:  # another process created it first
                if exc.status_code != _CONFLICT:
                    raise
        info = self._client.get_collection(self.collection)
        vectors = info.config.params.vectors
        params = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
        sparse = info.config.params.sparse_vectors or {}
        if (
            params is None
            or params.size != self.dim
            or params.distance != models.Distance.COSINE
            or SPARSE_VECTOR not in sparse
        ):
            raise ConfigurationError(
                f"qdrant collection {self.collection!r} has vectors {vectors!r} and sparse vectors "
                f"{list(sparse)}; expected a {DENSE_VECTOR!r} vector of size {self.dim} with cosine "
                f"distance and a {SPARSE_VECTOR!r} sparse vector"
            )
        for field, kind in PAYLOAD_INDEXES.items():
            if field not in info.payload_schema:
                self._client.create_payload_index(
                    self.collection, field, field_schema=_index_schema(field, kind), wait=True
                )

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailableError(f"vector store {self.collection!r} is closed")

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace points by id, ``upsert_batch_size`` per request; each needs a ``(d,)`` vector.

        Raises:
            ValueError: a record has no vector, a wrong shape, or NaN components.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        points = []
        for record in records:
            if record.vector is None:
                raise ValueError(f"record {record.id} has no vector; upsert needs one")
            vector: dict[str, Any] = {DENSE_VECTOR: check_vector(record.vector, self.dim).tolist()}
            if record.sparse:
                vector[SPARSE_VECTOR] = models.SparseVector(
                    indices=list(record.sparse.indices), values=list(record.sparse.values)
                )
            points.append(models.PointStruct(id=record.id, vector=vector, payload=record.payload))
        with _client_errors("upsert"):
            for start in range(0, len(points), self._batch):
                self._client.upsert(self.collection, points=points[start : start + self._batch], wait=True)

    @classmethod
    def _hits(cls, points: list[models.ScoredPoint]) -> list[ScoredRecord]:
        return [
            ScoredRecord(
                id=str(p.id), score=float(p.score), payload=_payload(p.payload), vector=named_dense(p.vector)
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
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        query = check_vector(vector, self.dim).tolist()
        query_filter = qdrant_filter(compile_filter(flt))
        with _client_errors("search"):
            response = self._client.query_points(
                self.collection,
                query=query,
                using=DENSE_VECTOR,
                query_filter=query_filter,
                limit=check_limit(limit),
                with_payload=True,
                with_vectors=[DENSE_VECTOR] if with_vectors else False,
            )
        return self._hits(response.points)

    def search_batch(self, vectors: FloatVector, flt: MemoryFilter, limit: int) -> list[list[ScoredRecord]]:
        """``search`` for each row of ``vectors`` ``(n, d)`` in one request; one list per row.

        Raises:
            ValueError: wrong matrix shape or ``limit`` < 1.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        matrix = check_matrix(vectors, self.dim)
        check_limit(limit)
        if len(matrix) == 0:
            return []
        query_filter = qdrant_filter(compile_filter(flt))
        requests = [
            models.QueryRequest(
                query=row.tolist(), using=DENSE_VECTOR, filter=query_filter, limit=limit, with_payload=True
            )
            for row in matrix
        ]
        with _client_errors("search batch"):
            responses = self._client.query_batch_points(self.collection, requests=requests)
        return [self._hits(response.points) for response in responses]

    def search_sparse(self, query: SparseVector, flt: MemoryFilter, limit: int) -> list[ScoredRecord]:
        """The ``limit`` points matching ``flt`` with the highest BM25 score for ``query``, best first.

        Raises:
            ValueError: ``limit`` < 1.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        check_limit(limit)
        if not query:
            return []
        with _client_errors("sparse search"):
            response = self._client.query_points(
                self.collection,
                query=models.SparseVector(indices=list(query.indices), values=list(query.values)),
                using=SPARSE_VECTOR,
                query_filter=qdrant_filter(compile_filter(flt)),
                limit=limit,
                with_payload=True,
                with_vectors=False,
            )
        return self._hits(response.points)

    def retrieve(self, ids: Sequence[str], with_vectors: bool = False) -> list[VectorRecord]:
        """The points with these ids, in the order asked; missing ids are skipped.

        Returned vectors are ``(d,)`` float32, L2-normalised by Qdrant (cosine storage).

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted:
            return []
        with _client_errors("retrieve"):
            found = self._client.retrieve(
                self.collection, ids=wanted, with_payload=True, with_vectors=with_vectors
            )
        by_id = {str(r.id): self._record(r, with_vectors) for r in found}
        return [by_id[i] for i in wanted if i in by_id]

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``{id: (d,) float32}`` dense vectors of these points without their payloads; missing ids
        are absent.

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted:
            return {}
        with _client_errors("retrieve vectors"):
            found = self._client.retrieve(
                self.collection, ids=wanted, with_payload=False, with_vectors=[DENSE_VECTOR]
            )
        return dense_by_id(found)

    @staticmethod
    def _record(found: models.Record, with_vectors: bool) -> VectorRecord:
        vectors = found.vector if with_vectors and isinstance(found.vector, dict) else {}
        sparse = vectors.get(SPARSE_VECTOR)
        return VectorRecord(
            id=str(found.id),
            vector=named_dense(vectors),
            payload=_payload(found.payload),
            sparse=None
            if not isinstance(sparse, models.SparseVector)
            else SparseVector(tuple(sparse.indices), tuple(sparse.values)),
        )

    def set_payload(self, ids: Sequence[str], values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the payload of the existing points among ``ids``; missing ids are skipped.

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted or not values:
            return
        # By filter, not by id list: the id-list form fails (after a partial write, in local mode)
        # on a missing id.
        has_ids: list[models.Condition] = [models.HasIdCondition(has_id=list(wanted))]
        selector = models.FilterSelector(filter=models.Filter(must=has_ids))
        with _client_errors("set payload"):
            self._client.set_payload(self.collection, payload=dict(values), points=selector, wait=True)

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
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        start = None if offset is None else canonical_id(offset)
        with _client_errors("scroll"):
            records, next_offset = self._client.scroll(
                self.collection,
                scroll_filter=_optional_filter(flt),
                limit=check_limit(limit),
                offset=start,
                with_payload=True if fields is None else list(fields),
                with_vectors=False,
            )
        page = [VectorRecord(id=str(r.id), vector=None, payload=_payload(r.payload)) for r in records]
        return page, None if next_offset is None else str(next_offset)

    def count(self, flt: MemoryFilter | None = None) -> int:
        """Exact number of points matching ``flt`` (``None``: every point).

        Raises:
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        with _client_errors("count"):
            return self._client.count(self.collection, count_filter=_optional_filter(flt), exact=True).count

    def facet(self, flt: MemoryFilter | None, key: str, limit: int = 100) -> dict[str, int]:
        """``{value: n}`` of the keyword field ``key`` over the points matching ``flt`` (exact facet
        counts from the server's payload index), the ``limit`` most frequent values.

        Raises:
            ValueError: ``key`` is not keyword-indexed, or ``limit`` < 1.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        with _client_errors("facet"):
            response = self._client.facet(
                self.collection,
                check_indexed(key, PayloadIndexKind.KEYWORD),
                facet_filter=_optional_filter(flt),
                limit=check_limit(limit),
                exact=True,
            )
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
        """The first ``limit`` points matching ``flt`` ordered by the float field ``key`` (the server's
        range index; ``order_by`` scroll), each with its value; ``fields``: payload keys (``()`` none,
        ``None`` all).

        Raises:
            ValueError: ``key`` is not float-indexed, or ``limit`` < 1.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        direction = models.Direction.DESC if descending else models.Direction.ASC
        order = models.OrderBy(key=check_indexed(key, PayloadIndexKind.FLOAT), direction=direction)
        with _client_errors("ordered scroll"):
            records, _ = self._client.scroll(
                self.collection,
                scroll_filter=_optional_filter(flt),
                limit=check_limit(limit),
                with_payload=True if fields is None else (list(fields) if fields else False),
                with_vectors=False,
                order_by=order,
            )
        return [OrderedRecord(str(r.id), float(r.order_value or 0.0), _payload(r.payload)) for r in records]

    def delete(self, ids: Sequence[str]) -> None:
        """Delete these points; missing ids are ignored.

        Raises:
            ValueError: an id is not a UUID string.
            StoreUnavailableError: the server failed or the store is closed.
        """
        self._check_open()
        wanted = unique_ids(ids)
        if not wanted:
            return
        selector = models.PointIdsList(points=list(wanted))
        with _client_errors("delete"):
            self._client.delete(self.collection, points_selector=selector, wait=True)

    def close(self) -> None:
        """Mark the store closed (later calls raise ``StoreUnavailableError``); the client stays open:
        its owner closes it. Closing twice is a no-op."""
        self._closed = True

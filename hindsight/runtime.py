"""Resources (clients and embedded servers) opened once per process and passed down to services.

Nothing here runs at import time. :func:`open_resources` is an async context manager that owns every
client a process needs; each resource is opened on first use, so a guard-only process never loads
the embedding model or opens the vector store. In ``local`` mode an empty URL means an embedded
store under ``data_dir`` (qdrant-edge, chdb, Valkey/Redis) and an empty Kafka bootstrap means an
embedded broker (only ``hindsight up`` starts one, :class:`hindsight.brokers.embedded.EmbeddedBroker`:
standalone services need a broker).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faststream import FastStream
from faststream.kafka import KafkaBroker

from hindsight.consumer import BatchRunner, Stage, subscribe
from hindsight.errors import ConfigurationError
from hindsight.publisher import EventPublisher
from hindsight.settings import AllSettings, KafkaSettings, exit_on_config_error

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client
    from pydantic_settings import BaseSettings
    from redis.asyncio import Redis

    from hindsight.analytics.store import AnalyticsStore
    from hindsight.inference.chat import ChatModel
    from hindsight.inference.embedder import Embedder
    from hindsight.inference.judge import FactExtractor, Judge
    from hindsight.inference.reranker import Reranker
    from hindsight.lexical import LexicalEncoder
    from hindsight.stores.accesslog import AccessLogStore
    from hindsight.stores.quarantine import QuarantineStore
    from hindsight.stores.reflection_queue import ReflectionQueue
    from hindsight.stores.vector import VectorStore
    from hindsight.tuning.settings_file import Applied

log = logging.getLogger("hindsight.runtime")


CHDB_OPTIONS: dict[str, object] = {"memory_worker_period_ms": 5000}
"""Options of the embedded ClickHouse engine (chDB): its memory worker reads the process's resident
memory every 100 ms by default, 0.2 % of a core on an idle ``hindsight up``; every 5 s is enough to
track a memory limit for an access log."""

GRACEFUL_TIMEOUT_S = 15.0
"""Seconds a stopping subscriber (SIGTERM) waits for its batch in flight to finish and commit."""


def make_broker(
    kafka: KafkaSettings, bootstrap: str | None = None, *, graceful_timeout_s: float = GRACEFUL_TIMEOUT_S
) -> KafkaBroker:
    """A FastStream ``KafkaBroker`` with ``acks=all`` (and the idempotent producer when
    ``HINDSIGHT_KAFKA_IDEMPOTENT`` is on); ``bootstrap`` overrides the setting.

    On stop (SIGTERM under ``faststream run``) every subscriber stops fetching, waits up to
    ``graceful_timeout_s`` seconds for its batch in flight to finish and commit, then leaves its
    group; the subscribers stop concurrently, so a process exits within about that bound.

    Raises:
        ConfigurationError: no bootstrap address is known.
    """
    servers = bootstrap or kafka.bootstrap
    if not servers:
        raise ConfigurationError(
            "no Kafka broker: set HINDSIGHT_KAFKA_BOOTSTRAP=host:port, or run 'hindsight up' which "
            "starts an embedded broker"
        )
    quiet = logging.getLogger("hindsight.faststream")
    if not any(isinstance(f, ShutdownCancellation) for f in quiet.filters):
        quiet.addFilter(ShutdownCancellation())
    return KafkaBroker(
        servers,
        acks="all",
        enable_idempotence=kafka.idempotent,
        client_id="hindsight",
        graceful_timeout=graceful_timeout_s,
        logger=quiet,
        log_level=logging.DEBUG,
    )


class ShutdownCancellation(logging.Filter):
    """FastStream logs a handler cancelled by a graceful stop as an error with a traceback; that is
    expected (the batch is not committed, Kafka redelivers it), so it becomes one INFO line."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Demote a record whose exception is a cancellation (dropped when its logger is quieter than
        INFO); keep every other record."""
        if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
            record.msg = f"handler cancelled by shutdown (not committed, redelivered): {record.msg}"
            return logging.getLogger(record.name).isEnabledFor(logging.INFO)
        return True


def check_delivery(settings: AllSettings) -> None:
    """Refuse a production process whose producer could duplicate or reorder on retries.

    Raises:
        ConfigurationError: ``HINDSIGHT_MODE=production`` without ``HINDSIGHT_KAFKA_IDEMPOTENT=true``.
    """
    if settings.runtime.mode == "production" and not settings.kafka.idempotent:
        raise ConfigurationError(
            "production mode needs the idempotent producer: set HINDSIGHT_KAFKA_IDEMPOTENT=true "
            "(Apache Kafka, Redpanda and managed Kafka support it; see docs/delivery.md)"
        )


def open_vector_store(settings: AllSettings) -> VectorStore:
    """Open the configured vector store: a Qdrant server by ``HINDSIGHT_QDRANT_URL``, else the embedded
    Qdrant engine under ``<data_dir>/qdrant/<collection>`` (one process per directory). The caller
    closes it.

    Raises:
        StoreUnavailableError: the store cannot be opened (e.g. another process holds the directory).
        ConfigurationError: an existing store has another dimension.
    """
    cfg = settings.qdrant
    dim = settings.embedder.dim
    if cfg.url:
        from qdrant_client import QdrantClient  # noqa: PLC0415

        from hindsight.stores.vector_qdrant import QdrantVectorStore  # noqa: PLC0415

        key = cfg.api_key.get_secret_value() if cfg.api_key else None
        client = QdrantClient(url=cfg.url, api_key=key, check_compatibility=cfg.check_compatibility)
        return QdrantVectorStore(client, cfg.collection, dim)
    from hindsight.stores.vector_edge import EdgeVectorStore  # noqa: PLC0415

    path = (settings.runtime.data_dir / "qdrant").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return EdgeVectorStore(path / cfg.collection, dim)


class Resources:
    """Clients of one process; created by :func:`open_resources`, passed to every service."""

    def __init__(self, settings: AllSettings, broker: KafkaBroker, stack: AsyncExitStack) -> None:
        self.settings = settings
        self.broker = broker
        self._stack = stack
        self._cache: dict[str, Any] = {}
        self.background: list[Callable[[], Coroutine[Any, Any, None]]] = []
        """Long-running jobs (e.g. the eviction schedule) the runner starts once the broker is up."""
        self.vector_store_wrapper: Callable[[VectorStore], VectorStore] | None = None
        """Applied once to the vector store when it is opened (fault injection, instrumentation);
        set it before anything asks for :meth:`vector_store`."""
        self.runners: dict[str, BatchRunner] = {}
        """Consumer group suffix -> the runner of the stage subscribed in it."""
        self.bootstrap: str | None = settings.kafka.bootstrap or None
        """Kafka bootstrap the process talks to (the embedded runner sets its broker's)."""
        self.stage_topics: dict[str, tuple[str, ...]] = {}
        """Consumer group suffix -> topics of the stages this process subscribed (filled by
        :meth:`subscribe`: what the embedded runner waits for and the console's lag view shows); empty
        in a process that runs no stage (a lone gateway reports :data:`hindsight.topology.STAGE_TOPICS`)."""
        self.tuned: dict[str, Applied] = {}
        """Service -> the tuned settings it applied at start-up (reported by the gateway's /healthz)."""

    def apply_tuned(self, service: str, settings: BaseSettings) -> Applied:
        """Apply the tuned-settings file to ``settings`` of ``service`` (explicit settings win) and
        record it (:func:`hindsight.tuning.settings_file.apply`).

        Raises:
            ConfigurationError: the tuned-settings file exists but is invalid.
        """
        from hindsight.tuning.settings_file import TuningSettings, apply  # noqa: PLC0415

        applied = apply(service, settings, TuningSettings(), self.settings.runtime.data_dir)
        self.tuned[service] = applied
        return applied

    def publisher(self) -> EventPublisher:
        """A fresh publisher for one batch or request."""
        return EventPublisher(self.broker)

    def subscribe(
        self,
        stage: Stage[Any],
        topics: Sequence[str],
        group: str,
        *,
        max_records: int | None = None,
        min_interval_s: float = 0.0,
        max_poll_interval_ms: int = 300_000,
    ) -> BatchRunner:
        """Register ``stage`` in consumer group ``<prefix>-<group>`` (batch settings from env; a stage
        whose records are heavy may cap ``max_records``; a sink with a fixed cost per write may
        gather batches for ``min_interval_s``; a stage whose batches wait on models may raise
        ``max_poll_interval_ms``, see :func:`~hindsight.consumer.subscribe`); returns its
        :class:`~hindsight.consumer.BatchRunner`."""
        kafka = self.settings.kafka
        group_id = kafka.group(group)
        runner = subscribe(
            self.broker,
            stage,
            topics=topics,
            group_id=group_id,
            group_instance_id=f"{group_id}-{kafka.instance_id}" if kafka.instance_id else None,
            publisher_factory=self.publisher,
            max_records=min(kafka.max_batch, max_records or kafka.max_batch),
            batch_timeout_ms=kafka.batch_timeout_ms,
            fetch_max_wait_ms=kafka.fetch_max_wait_ms,
            session_timeout_ms=kafka.session_timeout_ms,
            consumer_timeout_ms=kafka.consumer_timeout_ms,
            min_interval_s=min_interval_s,
            max_poll_interval_ms=max_poll_interval_ms,
        )
        self.runners[group] = runner
        self.stage_topics[group] = tuple(str(t) for t in topics)
        return runner

    def _data_dir(self, name: str) -> Path:
        path = (self.settings.runtime.data_dir / name).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path

    def embedder(self) -> Embedder:
        """The embedder (loads the model on first use), its query embeddings behind an LRU cache of
        ``HINDSIGHT_EMBEDDER_QUERY_CACHE_SIZE`` entries (one process, one model, one cache)."""
        if "embedder" not in self._cache:
            from hindsight.inference.embedder import CachedQueryEmbedder, build_embedder  # noqa: PLC0415

            embedder = build_embedder(self.settings.embedder)
            size = self.settings.embedder.query_cache_size
            self._cache["embedder"] = CachedQueryEmbedder(embedder, size) if size > 0 else embedder
        return self._cache["embedder"]  # type: ignore[no-any-return]

    def lexical(self) -> LexicalEncoder:
        """The BM25 sparse encoder (shared by ingest and recall so term ids agree)."""
        if "lexical" not in self._cache:
            from hindsight.lexical import LexicalEncoder  # noqa: PLC0415

            self._cache["lexical"] = LexicalEncoder()
        return self._cache["lexical"]  # type: ignore[no-any-return]

    def reranker(self) -> Reranker:
        """The reranker (``HINDSIGHT_RERANKER_*``); the local stand-in shares the embedder's engine."""
        if "reranker" not in self._cache:
            from hindsight.inference.reranker import build_reranker  # noqa: PLC0415

            local = self.settings.reranker.backend == "local"
            self._cache["reranker"] = build_reranker(
                self.settings.reranker, embedder=self.embedder() if local else None
            )
        return self._cache["reranker"]  # type: ignore[no-any-return]

    def chat_model(self) -> ChatModel:
        """The judge's and fact extractor's model (``HINDSIGHT_JUDGE_*``): loaded on first use (local:
        ~3.5 s, ~1.9 GB) and closed with the resources."""
        if "chat" not in self._cache:
            from hindsight.inference.judge import build_chat_model  # noqa: PLC0415

            chat = build_chat_model(self.settings.judge, self.settings.llm)
            self._stack.callback(chat.close)
            self._cache["chat"] = chat
        return self._cache["chat"]  # type: ignore[no-any-return]

    def judge(self) -> Judge:
        """The revision judge (shares :meth:`chat_model`)."""
        if "judge" not in self._cache:
            from hindsight.inference.judge import build_judge  # noqa: PLC0415

            self._cache["judge"] = build_judge(self.settings.judge, self.settings.llm, chat=self.chat_model())
        return self._cache["judge"]  # type: ignore[no-any-return]

    def fact_extractor(self) -> FactExtractor:
        """The fact extractor, also a :class:`~hindsight.inference.judge.LessonWriter` (shares
        :meth:`chat_model`)."""
        if "facts" not in self._cache:
            from hindsight.inference.judge import build_fact_extractor  # noqa: PLC0415

            self._cache["facts"] = build_fact_extractor(
                self.settings.judge, self.settings.llm, chat=self.chat_model()
            )
        return self._cache["facts"]  # type: ignore[no-any-return]

    def vector_store(self) -> VectorStore:
        """Qdrant server by URL, or the embedded Qdrant engine under ``data_dir/qdrant``."""
        if "vectors" not in self._cache:
            store = open_vector_store(self.settings)
            self._stack.callback(store.close)
            if self.vector_store_wrapper is not None:
                store = self.vector_store_wrapper(store)
            self._cache["vectors"] = store
        return self._cache["vectors"]  # type: ignore[no-any-return]

    def clickhouse(self) -> Client:
        """The process's one ClickHouse client (server by DSN, or embedded chdb under
        ``data_dir/clickhouse``: chDB allows one data directory per process), with the analytics schema
        migrated (:mod:`hindsight.analytics.schema`: versioned, applied at start-up).

        Raises:
            StoreUnavailableError: ClickHouse cannot be opened or refused a migration (an embedded
                directory held by another process says so).
            ConfigurationError: the database is at a newer schema version than this release.
        """
        if "clickhouse" not in self._cache:
            import clickhouse_connect  # noqa: PLC0415
            from clickhouse_connect.driver.exceptions import ClickHouseError  # noqa: PLC0415

            from hindsight.analytics.schema import SchemaNames, TtlDays, current_database  # noqa: PLC0415
            from hindsight.analytics.store import AnalyticsStore  # noqa: PLC0415
            from hindsight.errors import StoreUnavailableError  # noqa: PLC0415

            ch = self.settings.clickhouse
            dsn = ch.dsn or f"chdb://{self._data_dir('clickhouse')}"
            try:
                if dsn.startswith("chdb:"):
                    client = clickhouse_connect.get_client(dsn=dsn, chdb_options=CHDB_OPTIONS)
                else:
                    client = clickhouse_connect.get_client(dsn=dsn)
            except ClickHouseError as exc:
                hint = (
                    "check HINDSIGHT_CLICKHOUSE_DSN"
                    if ch.dsn
                    else "is another process using it? pass --data-dir"
                )
                raise StoreUnavailableError(f"cannot open ClickHouse at {dsn} ({hint}): {exc}") from exc
            self._stack.callback(client.close)
            ttl = TtlDays(
                access=ch.access_ttl_days,
                recall=ch.recall_ttl_days,
                feedback=ch.feedback_ttl_days,
                inventory=ch.inventory_ttl_days,
            )
            names = SchemaNames(ch.database or current_database(client), ch.table, ttl)
            store = AnalyticsStore(client, names)
            store.migrate()
            self._cache["analytics"] = store
            self._cache["clickhouse"] = client
        return self._cache["clickhouse"]  # type: ignore[no-any-return]

    def analytics(self) -> AnalyticsStore:
        """Recall log, feedback and inventory tables over :meth:`clickhouse`."""
        self.clickhouse()
        return self._cache["analytics"]  # type: ignore[no-any-return]

    def quarantine(self) -> QuarantineStore:
        """The quarantine store (ClickHouse table ``HINDSIGHT_CLICKHOUSE_QUARANTINE_TABLE``)."""
        if "quarantine" not in self._cache:
            from hindsight.stores.quarantine import QuarantineStore  # noqa: PLC0415

            store = QuarantineStore(self.clickhouse(), self.settings.clickhouse.quarantine_table)
            store.ensure_schema()
            self._cache["quarantine"] = store
        return self._cache["quarantine"]  # type: ignore[no-any-return]

    def access_log(self) -> AccessLogStore:
        """ClickHouse access log (created by migration 1 of the analytics schema)."""
        if "accesslog" not in self._cache:
            from hindsight.stores.accesslog import AccessLogStore  # noqa: PLC0415

            names = self.analytics().names
            table = names.access_log if "." in names.access_log else f"{names.database}.{names.access_log}"
            self._cache["accesslog"] = AccessLogStore(self.clickhouse(), table)
        return self._cache["accesslog"]  # type: ignore[no-any-return]

    async def redis(self) -> Redis:
        """Async Redis client: by URL, or an embedded Valkey/Redis (AOF) under ``data_dir/redis``."""
        if "redis" not in self._cache:
            from redis.asyncio import Redis as AsyncRedis  # noqa: PLC0415

            url = self.settings.redis.url
            if not url:
                from hindsight.stores.redis_server import EmbeddedRedis  # noqa: PLC0415

                server = self._stack.enter_context(EmbeddedRedis(self._data_dir("redis")))
                url = server.url
            client = AsyncRedis.from_url(url)
            self._stack.push_async_callback(client.aclose)
            self._cache["redis"] = client
        return self._cache["redis"]  # type: ignore[no-any-return]

    async def reflection_queue(self) -> ReflectionQueue:
        """This deployment's queue of parked session closes (keys under ``<group prefix>:reflect``,
        :func:`hindsight.stores.reflection_queue.key_prefix`), on :meth:`redis`."""
        from hindsight.stores.reflection_queue import ReflectionQueue, key_prefix  # noqa: PLC0415

        return ReflectionQueue(await self.redis(), key_prefix=key_prefix(self.settings.kafka.group_prefix))


@asynccontextmanager
async def open_resources(settings: AllSettings, broker: KafkaBroker) -> AsyncIterator[Resources]:
    """Open a :class:`Resources` whose clients close (in reverse order) on exit."""
    async with AsyncExitStack() as stack:
        yield Resources(settings, broker, stack)


@asynccontextmanager
async def run_background(resources: Resources) -> AsyncIterator[list[asyncio.Task[None]]]:
    """Run ``resources.background`` jobs as tasks; cancel and await them on exit."""
    tasks = [asyncio.create_task(job(), name=getattr(job, "__name__", "job")) for job in resources.background]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


Register = Callable[[Resources], Any]
"""A service's ``register(resources)``: adds its subscribers (and background tasks) to the broker."""


def service_app(register: Register, *, settings: AllSettings | None = None) -> FastStream:
    """Build a standalone FastStream app for one service (``faststream run pkg.app:create_app --factory``).

    Settings are read here (inside the factory, never at import); resources are opened in the app's
    lifespan and the service's subscribers registered before the broker starts. SIGTERM drains:
    see :func:`make_broker`.

    A configuration error (an invalid variable, production without a secret) is one line on stderr
    naming the setting, and exit status 2 (:func:`~hindsight.settings.exit_on_config_error`).
    """
    with exit_on_config_error():
        cfg = settings or AllSettings()
        check_delivery(cfg)
        broker = make_broker(cfg.kafka)

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        from hindsight.observability import configure_logging  # noqa: PLC0415

        configure_logging(cfg.runtime)
        async with open_resources(cfg, broker) as resources:
            await _maybe_await(register(resources))
            async with run_background(resources):
                yield

    return FastStream(broker, lifespan=lifespan)


async def _maybe_await(value: Any) -> None:
    if hasattr(value, "__await__"):
        await value

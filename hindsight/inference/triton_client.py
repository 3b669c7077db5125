"""One Triton model seen through ``tritonclient`` (HTTP or gRPC): readiness, batching limits, errors, retries.

:class:`TritonModel` is what :class:`~hindsight.inference.triton_embedder.TritonEmbedder`,
:class:`~hindsight.inference.triton_reranker.TritonReranker` and the gRPC path of
:class:`~hindsight.inference.llm_triton.TritonLLM` share:

- one tritonclient client per OS thread (tritonclient clients are not thread-safe, and the
  embedder is called from ``asyncio.to_thread`` workers), created on first use, never at import;
- the model's config fetched once (``max_batch_size``, output dims), after checking that the server
  is live and the model ready;
- errors mapped to the error tree: a server that is down, a model that is loading, a timeout or a
  5xx/``UNAVAILABLE`` answer is :class:`~hindsight.errors.ModelUnavailableError` (retryable: the
  consumer does not commit and retries the batch); a model missing from the repository or a request
  the model rejects (wrong tensor names, shapes) is :class:`~hindsight.errors.ConfigurationError`.
  Both name the model, the URL and what to check;
- bounded retries with exponential backoff (tenacity) on ``ModelUnavailableError`` only. After a
  connection-level failure the thread's client is dropped, so the next attempt opens a fresh
  connection instead of waiting out gRPC's reconnect backoff.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential
from tritonclient.utils import InferenceServerException

from hindsight.errors import ConfigurationError, HindsightError, ModelUnavailableError

if TYPE_CHECKING:
    from hindsight.settings import EmbedderSettings, LLMSettings, RerankerSettings

T = TypeVar("T")

Transport = Literal["grpc", "http"]
"""How tritonclient talks to the server."""

_RETRYABLE_GRPC = {
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    "RESOURCE_EXHAUSTED",
    "ABORTED",
    "CANCELLED",
    "INTERNAL",
    "UNKNOWN",
}
_NOT_READY_HINTS = ("not ready", "no available versions", "is not found", "unavailable", "stub process")


@dataclass(frozen=True)
class TritonTarget:
    """Where a model lives and how to call it.

    Attributes:
        url: ``host:port`` without scheme (gRPC default port 8001, HTTP 8000).
        protocol: ``grpc`` or ``http``.
        model: model name in the Triton repository, e.g. ``embedder``.
        timeout_s: per-request timeout in seconds.
        max_attempts: attempts per call on transient errors (1 = no retry).
        env_prefix: settings prefix named in error messages, e.g. ``HINDSIGHT_EMBEDDER_``.
        backoff_max_s: longest wait between attempts (s).
    """

    url: str
    protocol: Transport
    model: str
    timeout_s: float = 30.0
    max_attempts: int = 3
    env_prefix: str = "HINDSIGHT_EMBEDDER_"
    backoff_max_s: float = 2.0

    @classmethod
    def from_settings(cls, settings: EmbedderSettings | RerankerSettings | LLMSettings) -> TritonTarget:
        """The target a model's settings name (address, protocol, model, timeout, attempts); error
        messages name the settings' own env prefix (e.g. ``HINDSIGHT_RERANKER_``)."""
        return cls(
            url=settings.triton_address(),
            protocol=settings.triton_protocol,
            model=settings.triton_model,
            timeout_s=settings.timeout_s,
            max_attempts=settings.max_attempts,
            env_prefix=str(settings.model_config.get("env_prefix", "")),
        )

    @property
    def display(self) -> str:
        """``grpc://host:port`` or ``http://host:port``, for messages."""
        return f"{self.protocol}://{self.url}"

    def hint(self) -> str:
        """What to check when the model cannot be reached."""
        return (
            f"check that tritonserver is running on {self.display} with model '{self.model}' loaded "
            "(scripts/setup-triton.sh, infra/triton/README.md; HTTP readiness: "
            f"GET /v2/models/{self.model}/ready) "
            f"and that {self.env_prefix}TRITON_URL / {self.env_prefix}TRITON_PROTOCOL / "
            f"{self.env_prefix}TRITON_MODEL point at it"
        )


@dataclass(frozen=True)
class ModelInfo:
    """What the client needs from a model's config.

    Attributes:
        max_batch_size: rows per request the model accepts (0 = the model does not batch).
        output_dims: declared dims (without the batch dimension) per output name.
        parameters: the config's string parameters (e.g. ``model_name``).
    """

    max_batch_size: int
    output_dims: Mapping[str, tuple[int, ...]]
    parameters: Mapping[str, str]


def _status(exc: InferenceServerException) -> str:
    status = exc.status()
    return str(status).removeprefix("StatusCode.") if status is not None else ""


def _is_transient(exc: InferenceServerException) -> bool:
    status = _status(exc)
    if status in _RETRYABLE_GRPC:
        return True
    if status.isdigit():
        code = int(status)
        if code >= 500 or code == 429:
            return True
    message = (exc.message() or "").lower()
    return any(h in message for h in _NOT_READY_HINTS) or status == ""


def _connection_errors() -> tuple[type[BaseException], ...]:
    """Exception classes that mean 'could not talk to the server' (socket, HTTP parse, gevent timeout)."""
    errors: list[type[BaseException]] = [OSError, http.client.HTTPException]
    try:
        import gevent  # noqa: PLC0415  (tritonclient.http's transport; absent without the http extra)
    except ImportError:  # pragma: no cover - tritonclient[http] is a project dependency
        return tuple(errors)
    errors.append(gevent.Timeout)
    return tuple(errors)


class TritonModel:
    """Calls one model of one Triton server; thread-safe (a client per thread).

    Nothing is contacted until the first call. Close with :meth:`close`.
    """

    def __init__(self, target: TritonTarget) -> None:
        if target.protocol not in ("grpc", "http"):
            raise ConfigurationError(
                f"{target.env_prefix}TRITON_PROTOCOL must be 'grpc' or 'http', not {target.protocol!r}"
            )
        self.target = target
        self._local = threading.local()
        self._lock = threading.Lock()
        self._clients: list[Any] = []
        self._info: ModelInfo | None = None
        self._conn_errors = _connection_errors()

    # -- clients -----------------------------------------------------------------------------------

    def _client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._new_client()
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def _new_client(self) -> Any:
        t = self.target
        if t.protocol == "grpc":
            import tritonclient.grpc as grpcclient  # noqa: PLC0415

            return grpcclient.InferenceServerClient(t.url)
        import tritonclient.http as httpclient  # noqa: PLC0415

        return httpclient.InferenceServerClient(
            t.url, connection_timeout=t.timeout_s, network_timeout=t.timeout_s, concurrency=1
        )

    def _drop_client(self) -> None:
        client = getattr(self._local, "client", None)
        self._local.client = None
        if client is not None:
            with self._lock:
                if client in self._clients:
                    self._clients.remove(client)
            _close_quietly(client)

    def close(self) -> None:
        """Close every client this object opened (any thread's)."""
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            _close_quietly(client)
        self._local = threading.local()

    # -- error mapping and retries -----------------------------------------------------------------

    def _unavailable(self, what: str, detail: str) -> ModelUnavailableError:
        return ModelUnavailableError(
            f"Triton {what} for model '{self.target.model}' at {self.target.display} failed: {detail}; "
            + self.target.hint()
        )

    def error_for(self, what: str, exc: BaseException) -> HindsightError:
        """The Hindsight error for a tritonclient or transport exception raised by a ``what`` call.

        Drops this thread's client after a connection-level failure. Transport errors, timeouts,
        5xx/``UNAVAILABLE`` and not-ready answers give :class:`ModelUnavailableError`; other
        server answers (invalid request, wrong tensors) give :class:`ConfigurationError`.
        """
        if isinstance(exc, InferenceServerException):
            status, message = _status(exc), exc.message() or str(exc)
            if _is_transient(exc):
                if status in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "") or "connect" in message.lower():
                    self._drop_client()
                return self._unavailable(what, f"{status or 'error'}: {message}")
            return ConfigurationError(
                f"Triton model '{self.target.model}' at {self.target.display} rejected the {what} request "
                f"({status}: {message}); check that the server runs the Hindsight model repository "
                f"(infra/triton/) whose tensors this client speaks, and {self.target.env_prefix}TRITON_MODEL"
            )
        self._drop_client()
        return self._unavailable(what, f"{type(exc).__name__}: {exc}")

    def once(self, what: str, fn: Callable[[Any], T]) -> T:
        """Run ``fn(client)`` once, mapping tritonclient and transport errors (:meth:`error_for`).

        Raises:
            ModelUnavailableError: the server is unreachable, timed out, or the model is not ready.
            ConfigurationError: the server rejected the request as invalid (wrong model or tensors).
        """
        try:
            return fn(self._client())
        except InferenceServerException as exc:
            raise self.error_for(what, exc) from exc
        except self._conn_errors as exc:
            raise self.error_for(what, exc) from exc

    @property
    def connection_errors(self) -> tuple[type[BaseException], ...]:
        """Transport exception classes mapped by :meth:`error_for` (besides ``InferenceServerException``)."""
        return self._conn_errors

    def retrying(self) -> Retrying:
        """Bounded retries on ``ModelUnavailableError``: ``max_attempts``, exponential backoff."""
        return Retrying(
            retry=retry_if_exception_type(ModelUnavailableError),
            stop=stop_after_attempt(self.target.max_attempts),
            wait=wait_exponential(multiplier=0.1, max=self.target.backoff_max_s),
            reraise=True,
        )

    def call(self, what: str, fn: Callable[[Any], T]) -> T:
        """:meth:`once` with up to ``max_attempts`` attempts and exponential backoff on transient errors.

        Raises:
            ModelUnavailableError: still failing after the last attempt.
            ConfigurationError: not retried (see :meth:`once`).
        """
        result: T = self.retrying()(self.once, what, fn)
        return result

    # -- readiness and config ----------------------------------------------------------------------

    def check_ready(self) -> ModelInfo:
        """Check the server is live and the model ready (once per attempt); return its config.

        Raises:
            ModelUnavailableError: the server is down or the model not (yet) ready, after the retries.
            ConfigurationError: the server runs but its repository has no such model.
        """
        return self.call("readiness check", self._ready_once)

    def _ready_once(self, client: Any) -> ModelInfo:
        timeout = self.target.timeout_s
        grpc = self.target.protocol == "grpc"
        kwargs = {"client_timeout": timeout} if grpc else {}
        if not client.is_server_live(**kwargs):
            raise self._unavailable("readiness check", "server is not live")
        if not client.is_model_ready(self.target.model, **kwargs):
            if grpc:
                index = client.get_model_repository_index(as_json=True, client_timeout=timeout)
                entries = index.get("models", [])
            else:
                entries = client.get_model_repository_index()
            names = sorted({str(m.get("name")) for m in entries})
            if self.target.model not in names:
                raise ConfigurationError(
                    f"Triton at {self.target.display} has no model '{self.target.model}' "
                    f"(repository has {names}); set {self.target.env_prefix}TRITON_MODEL or start "
                    "tritonserver on the Hindsight model repository (infra/triton/cpu or gpu)"
                )
            raise self._unavailable("readiness check", "model is not ready (still loading or unloaded)")
        if grpc:
            raw = client.get_model_config(self.target.model, as_json=True, client_timeout=timeout)
        else:
            raw = client.get_model_config(self.target.model)
        config = raw.get("config", raw)
        outputs = {str(o["name"]): tuple(int(d) for d in o.get("dims", ())) for o in config.get("output", [])}
        params = {str(k): str(v.get("string_value", "")) for k, v in (config.get("parameters") or {}).items()}
        return ModelInfo(int(config.get("max_batch_size", 0)), outputs, params)

    def info(self) -> ModelInfo:
        """The model's config, fetched by :meth:`check_ready` on first use and then cached.

        Raises:
            ModelUnavailableError / ConfigurationError: as :meth:`check_ready`.
        """
        if self._info is None:
            self._info = self.check_ready()
        return self._info

    # -- inference ---------------------------------------------------------------------------------

    def infer(
        self, inputs: Sequence[tuple[str, np.ndarray]], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """One inference request (retried on transient errors); returns each requested output.

        ``inputs`` are ``(name, array)``: object arrays of ``bytes`` become BYTES tensors, others
        keep their numpy dtype.

        Raises:
            ModelUnavailableError: see :meth:`call`.
            ConfigurationError: the model rejected the request.
        """
        grpc = self.target.protocol == "grpc"
        if grpc:
            import tritonclient.grpc as mod  # noqa: PLC0415
        else:
            import tritonclient.http as mod  # noqa: PLC0415
        from tritonclient.utils import np_to_triton_dtype  # noqa: PLC0415

        def build() -> tuple[list[Any], list[Any]]:
            ins = []
            for name, array in inputs:
                dtype = "BYTES" if array.dtype == np.object_ else np_to_triton_dtype(array.dtype)
                tensor = mod.InferInput(name, list(array.shape), dtype)
                tensor.set_data_from_numpy(array)
                ins.append(tensor)
            return ins, [mod.InferRequestedOutput(name) for name in outputs]

        def run(client: Any) -> dict[str, np.ndarray]:
            ins, outs = build()
            if grpc:
                result = client.infer(
                    self.target.model, ins, outputs=outs, client_timeout=self.target.timeout_s
                )
            else:
                result = client.infer(self.target.model, ins, outputs=outs)
            got = {name: result.as_numpy(name) for name in outputs}
            missing = [name for name, value in got.items() if value is None]
            if missing:
                raise ConfigurationError(
                    f"Triton model '{self.target.model}' at {self.target.display} returned no {missing}; "
                    "check that it is the Hindsight model (infra/triton/)"
                )
            return {name: np.asarray(value) for name, value in got.items()}

        return self.call("inference", run)

    def statistics(self) -> dict[str, Any]:
        """The server's inference statistics for this model (``inference_count``, ``execution_count``...).

        Raises:
            ModelUnavailableError: the server did not answer.
        """
        grpc = self.target.protocol == "grpc"

        def run(client: Any) -> dict[str, Any]:
            if grpc:
                raw = client.get_inference_statistics(
                    self.target.model, as_json=True, client_timeout=self.target.timeout_s
                )
            else:
                raw = client.get_inference_statistics(self.target.model)
            stats = raw.get("model_stats", [])
            return dict(stats[0]) if stats else {}

        return self.call("statistics", run)


def chunks(n: int, size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in pieces of at most ``size`` (``size`` >= 1)."""
    size = max(1, size)
    return [(start, min(n, start + size)) for start in range(0, n, size)]


def batch_limit(requested: int, info: ModelInfo) -> int:
    """Rows per request: ``requested`` capped by the model's ``max_batch_size`` (when it batches)."""
    return min(requested, info.max_batch_size) if info.max_batch_size > 0 else requested


def bytes_column(texts: Sequence[str]) -> np.ndarray:
    """``(n, 1)`` object array of UTF-8 ``bytes``: a BYTES tensor with one row per text."""
    return np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_).reshape(len(texts), 1)


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except (OSError, InferenceServerException, HindsightError):  # closing a dead connection
        return

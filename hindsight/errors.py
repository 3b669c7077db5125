"""One exception root for Hindsight, split by what a consumer must do.

A consumer's top-level handler is the only place that catches broadly; below it, code raises one
of these classes and the handler maps it to broker behaviour:

- ``DeadLetterError``: the message can never be processed (malformed, schema-invalid, rejected by
  policy). Publish it to the dead-letter topic with the stage and reason, commit, keep going.
- ``RetryableError``: a store or model is unavailable or timed out. Do not commit; retry the batch
  with bounded exponential backoff, then rewind and pause its partitions (capped exponential pause)
  and redeliver; never drop the message.
- ``BackpressureError``: a downstream is saturated. Do not retry in place: rewind and pause the
  partitions for ``retry_after`` seconds, then resume; never drop the message.
- ``ConfigurationError``: the process cannot start as configured (missing secret, bad DSN). Fail fast.
- ``RequestError``: a gateway caller sent something invalid. Maps to HTTP 4xx / an MCP tool error
  naming the field and the fix.
"""

from __future__ import annotations


class HindsightError(Exception):
    """Root of every error Hindsight raises on purpose."""


class DeadLetterError(HindsightError):
    """The message is unprocessable: dead-letter it with ``stage`` and ``reason`` and keep going."""

    def __init__(self, reason: str, *, stage: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stage = stage


class RetryableError(HindsightError):
    """A transient failure (store or model unavailable): retry with backoff, do not commit."""


class StoreUnavailableError(RetryableError):
    """A store (Kafka, Qdrant, ClickHouse, Redis) did not answer or refused the write."""


class ModelUnavailableError(RetryableError):
    """An inference backend (local model, Triton, OpenAI-compatible endpoint) failed transiently."""


class NotReadyError(RetryableError):
    """An expected wait, not a failure: the event depends on work still in flight (a session close
    that overtook its own turns). The runtime retries and pauses it like a transient failure, but
    logs it at INFO: a user watching the logs must not read a normal wait as an error.
    """


class BackpressureError(RetryableError):
    """A downstream is saturated: pause the partition for ``retry_after`` seconds, then resume.

    A subclass of :class:`RetryableError` (code that only knows "transient" still never commits),
    but the consumer runtime handles it first and does not retry it in place.
    """

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConfigurationError(HindsightError):
    """The process cannot start as configured (missing secret in production, bad DSN, ...)."""


class RequestError(HindsightError):
    """A gateway caller sent an invalid request; ``field`` names the culprit and ``fix`` the remedy.

    Maps to HTTP 400 (or ``status_code``) and to an MCP tool error.
    """

    def __init__(self, message: str, *, field: str, fix: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.fix = fix
        self.status_code = status_code


class AuthenticationError(RequestError):
    """Missing or unknown API key (HTTP 401)."""

    def __init__(self, message: str = "missing or unknown API key") -> None:
        super().__init__(
            message,
            field="Authorization",
            fix="send 'Authorization: Bearer <api key>' with a key configured in HINDSIGHT_GATEWAY_API_KEYS",
            status_code=401,
        )

"""Retrying a token stream safely: retry only until the first piece arrives, never after."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tenacity import Retrying


def retry_until_first(open_stream: Callable[[], Iterator[str]], retrying: Retrying) -> Iterator[str]:
    """Yield ``open_stream()``'s pieces, reopening it under ``retrying`` until its first piece arrives.

    A failure after the first piece was yielded propagates as is (the caller already has part of
    the reply; repeating it would duplicate text). The stream is closed if the consumer stops early.

    Raises:
        ModelUnavailableError: every attempt failed before the first piece, or the stream broke later.
        ConfigurationError: the backend rejected the request (never retried).
    """

    def first() -> tuple[str | None, Iterator[str]]:
        stream = open_stream()
        opened = False
        try:
            head = next(stream, None)
            opened = True
            return head, stream
        finally:
            if not opened:  # the first read failed: release the connection before retrying
                _close(stream)

    head, rest = retrying(first)
    try:
        if head is None:
            return
        yield head
        yield from rest
    finally:
        _close(rest)


def _close(stream: Iterator[str]) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()

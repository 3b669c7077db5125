"""``hindsight dlq list|show|replay``: inspect ``memory.dlq.v1`` and replay dead letters after a fix.

A dead letter is addressed by its own coordinates in the DLQ, ``<partition>:<offset>``. The DLQ is
at-least-once like every topic: a stage that crashes after dead-lettering a record and before its
commit dead-letters it again, so records with the same identity (stage, source topic, partition,
offset) are shown once, with the number of copies.

Replay publishes the original bytes (or a fixed version read from a file, validated first against
the source topic's schema) to the original topic with the original key, through the idempotent
producer (``acks=all``), with a ``hindsight-replay-of`` header. Replaying is safe to repeat: memory
ids derive from event ids, so replaying the same event twice still yields one memory.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from pydantic import BaseModel, ValidationError

from hindsight.brokers import read_topic
from hindsight.consumer import describe_validation_error
from hindsight.errors import ConfigurationError, HindsightError, StoreUnavailableError
from schemas import (
    AccessEvent,
    DeadLetter,
    GuardedEvent,
    InteractionEvent,
    MemoryCandidate,
    SessionClosedEvent,
    Topic,
)

REPLAY_HEADER = "hindsight-replay-of"
"""Header naming the dead letter (``<partition>:<offset>``) a replayed record comes from."""

SOURCE_MODELS: dict[str, type[BaseModel]] = {
    str(Topic.INTERACTIONS): InteractionEvent,
    str(Topic.SESSIONS): SessionClosedEvent,
    str(Topic.GUARDED): GuardedEvent,
    str(Topic.CANDIDATES): MemoryCandidate,
    str(Topic.ACCESS): AccessEvent,
}
"""Source topic -> the model a fixed record must validate against before it is replayed."""


class DeadLetterNotFoundError(HindsightError):
    """No dead letter has the requested id (``<partition>:<offset>`` in ``memory.dlq.v1``)."""


class InvalidFixError(HindsightError):
    """A fixed record does not validate against its source topic's schema; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    """One distinct dead letter: ``id`` of its first copy, the letter, and how many copies exist."""

    id: str
    letter: DeadLetter
    copies: int

    @property
    def original(self) -> bytes:
        """The original record value as the stage received it."""
        return base64.b64decode(self.letter.original_b64)

    def summary(self) -> dict[str, Any]:
        """A one-line JSON-able view (``reason`` cut at 160 characters)."""
        d = self.letter
        return {
            "id": self.id,
            "stage": d.stage,
            "error_type": d.error_type,
            "source": f"{d.topic}/{d.partition}@{d.offset}",
            "key": d.key,
            "first_seen_at": d.first_seen_at.isoformat(),
            "copies": self.copies,
            "reason": d.reason if len(d.reason) <= 160 else d.reason[:159] + "…",
        }

    def detail(self) -> dict[str, Any]:
        """The whole letter, with the original bytes decoded (JSON when they parse, else text)."""
        out: dict[str, Any] = {"id": self.id, "copies": self.copies, **self.letter.model_dump(mode="json")}
        text = self.original.decode("utf-8", "replace")
        try:
            out["original"] = json.loads(text)
        except json.JSONDecodeError:
            out["original"] = text
        return out


async def load(bootstrap: str, *, stage: str | None = None, timeout_s: float = 60.0) -> list[Entry]:
    """Every distinct dead letter (optionally of one ``stage``), oldest first.

    Raises:
        StoreUnavailableError: Kafka could not be read within ``timeout_s``.
    """
    entries: dict[tuple[str, str, int, int], Entry] = {}
    for rec in await read_topic(bootstrap, str(Topic.DLQ), timeout_s=timeout_s):
        if rec.value is None:
            continue
        try:
            letter = DeadLetter.model_validate_json(rec.value)
        except ValidationError:
            continue  # not written by Hindsight: not ours to replay
        if stage is not None and letter.stage != stage:
            continue
        ident = (letter.stage, letter.topic, letter.partition, letter.offset)
        known = entries.get(ident)
        if known is None:
            entries[ident] = Entry(f"{rec.partition}:{rec.offset}", letter, 1)
        else:
            entries[ident] = Entry(known.id, known.letter, known.copies + 1)
    return sorted(entries.values(), key=lambda e: e.letter.first_seen_at)


def find(entries: list[Entry], ids: list[str]) -> list[Entry]:
    """The entries with these ids (as ``hindsight dlq list`` shows them), in the order asked.

    Raises:
        DeadLetterNotFoundError: an id names no dead letter.
    """
    by_id = {e.id: e for e in entries}
    found = []
    for wanted in ids:
        if wanted not in by_id:
            raise DeadLetterNotFoundError(
                f"no dead letter {wanted!r} in {Topic.DLQ} "
                "(ids are <partition>:<offset>; see `hindsight dlq list`)"
            )
        found.append(by_id[wanted])
    return found


def check_fix(entry: Entry, fixed: bytes) -> None:
    """Validate ``fixed`` against the schema of ``entry``'s source topic (unknown topics: JSON only).

    Raises:
        InvalidFixError: it does not validate; the reason names the fields.
    """
    model = SOURCE_MODELS.get(entry.letter.topic)
    try:
        if model is None:
            json.loads(fixed)
        else:
            model.model_validate_json(fixed)
    except ValidationError as exc:
        raise InvalidFixError(
            f"the fix for {entry.id} is still invalid: {describe_validation_error(exc)}"
        ) from exc
    except ValueError as exc:
        raise InvalidFixError(f"the fix for {entry.id} is not JSON: {exc}") from exc


async def replay(
    bootstrap: str, entries: list[Entry], *, fixed: bytes | None = None, idempotent: bool = True
) -> list[dict[str, Any]]:
    """Publish each entry's original bytes (or ``fixed``, for a single entry) to its source topic
    with its original key; returns where each landed.

    Raises:
        ConfigurationError: ``fixed`` given for more than one entry.
        InvalidFixError: ``fixed`` does not validate against the source topic's schema, or an entry
            kept only the first bytes of its record (``original_truncated``) and no fix is given.
        StoreUnavailableError: Kafka refused or did not acknowledge (``acks=all``).
    """
    if fixed is not None:
        if len(entries) != 1:
            raise ConfigurationError("--fixed replaces one record: name exactly one dead letter id")
        check_fix(entries[0], fixed)
    for entry in entries:
        if fixed is None and entry.letter.original_truncated:
            raise InvalidFixError(
                f"{entry.id} keeps only the first {len(entry.original)} of {entry.letter.original_size} "
                f"bytes of its record (sha256 {entry.letter.original_sha256}): replay it with --fixed FILE"
            )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent)
    done: list[dict[str, Any]] = []
    try:
        await producer.start()
        for entry in entries:
            d = entry.letter
            value = fixed if fixed is not None else entry.original
            key = d.key.encode() if d.key is not None else None
            meta = await producer.send_and_wait(
                d.topic, value, key=key, headers=[(REPLAY_HEADER, entry.id.encode())]
            )
            done.append(
                {
                    "id": entry.id,
                    "to": f"{meta.topic}/{meta.partition}@{meta.offset}",
                    "fixed": fixed is not None,
                }
            )
    except KafkaError as exc:
        raise StoreUnavailableError(
            f"replay to {bootstrap} failed after {len(done)} record(s): {exc!r}"
        ) from exc
    finally:
        await producer.stop()
    return done

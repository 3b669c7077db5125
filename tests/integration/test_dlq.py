"""Dead-letter tooling on the running pipeline: list, show, replay after a fix, exactly once.

Uses the session's embedded pipeline (``stack``: every consumer in-process on the session's real
Kafka, real Redis and chDB) and the ``hindsight dlq`` commands.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from pydantic import BaseModel
from typer.testing import CliRunner

from hindsight.brokers.admin import read_topic
from hindsight.consumer import DEAD_LETTER_MAX_BYTES, Envelope, Rejection, run_batch
from hindsight.publisher import EventPublisher
from hindsight.records import from_payload
from hindsight.runtime import make_broker
from hindsight.settings import KafkaSettings
from hindsight.stores.vector import MemoryFilter
from schemas import InteractionEvent, Topic, partition_key
from services.cli import dlq
from services.cli.embedded import Stack
from services.cli.main import app

pytestmark = pytest.mark.integration

TENANT = "tenant-a"


def valid_event(user: str) -> InteractionEvent:
    return InteractionEvent(
        event_id=f"dlq-{user}",
        tenant_id=TENANT,
        user_id=user,
        agent_id="agent-1",
        session_id="s-dlq",
        occurred_at=datetime(2026, 11, 1, 9, 0, tzinfo=UTC),
        source="user",
        content="I booked the ferry to Hydra for the second week of June.",
        turn_index=0,
    )


async def publish_raw(stack: Stack, key: bytes, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(str(Topic.INTERACTIONS), value, key=key)
    finally:
        await producer.stop()
    await stack.wait_caught_up(timeout_s=180)


def turn_memories(stack: Stack, user: str) -> list[str]:
    records, _ = stack.resources.vector_store().scroll(
        MemoryFilter(tenant_id=TENANT, user_id=user, statuses=None), 100
    )
    return [from_payload(r.payload).content for r in records]


async def cli(*args: str) -> str:
    """Run ``hindsight <args>`` (in a thread: the command runs its own event loop)."""
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


async def test_replaying_a_fixed_dead_letter_yields_the_memory_exactly_once(
    stack: Stack, tmp_path: Path
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    good = valid_event(user)
    broken = json.loads(good.model_dump_json())
    broken["occurred_at"] = "2026-11-01T09:00:00"  # no time zone: schema-invalid
    key = partition_key(TENANT, user)
    await publish_raw(stack, key, json.dumps(broken).encode())
    assert turn_memories(stack, user) == []

    listed = [
        json.loads(line) for line in (await cli("dlq", "list", "--bootstrap", stack.bootstrap)).splitlines()
    ]
    mine = [entry for entry in listed if entry["key"] == key.decode()]
    assert len(mine) == 1
    entry = mine[0]
    assert entry["stage"] == "guard"
    assert entry["source"].startswith(f"{Topic.INTERACTIONS}/")
    assert "occurred_at" in entry["reason"]
    shown = json.loads(await cli("dlq", "show", entry["id"], "--bootstrap", stack.bootstrap))
    assert shown["original"] == broken

    still_broken = tmp_path / "still-broken.json"
    still_broken.write_text(json.dumps(broken))
    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["dlq", "replay", entry["id"], "--fixed", str(still_broken), "--bootstrap", stack.bootstrap],
    )
    assert result.exit_code != 0
    assert "occurred_at" in result.output, "an invalid fix is refused before it is published"

    fixed = tmp_path / "fixed.json"
    fixed.write_text(good.model_dump_json())
    for _ in range(2):  # replaying twice yields the memory once
        out = await cli("dlq", "replay", entry["id"], "--fixed", str(fixed), "--bootstrap", stack.bootstrap)
        assert json.loads(out)["to"].startswith(f"{Topic.INTERACTIONS}/")
        await stack.wait_caught_up(timeout_s=180)
    assert turn_memories(stack, user) == [good.content]


async def test_replaying_an_unfixed_dead_letter_dead_letters_it_again_and_stores_nothing(
    stack: Stack,
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    key = partition_key(TENANT, user)
    await publish_raw(stack, key, b'{"event_id": "cut off')
    (entry,) = [e for e in await dlq.load(stack.bootstrap, stage="guard") if e.letter.key == key.decode()]
    (replayed,) = await dlq.replay(stack.bootstrap, [entry], idempotent=False)
    await stack.wait_caught_up(timeout_s=180)
    again = [e for e in await dlq.load(stack.bootstrap, stage="guard") if e.letter.key == key.decode()]
    assert len(again) == 2, "the replayed record is a new record (new offset), dead-lettered again"
    assert {e.original for e in again} == {entry.original}
    assert replayed["to"].endswith(f"@{max(e.letter.offset for e in again)}")
    assert turn_memories(stack, user) == []


async def _largest_accepted_value(bootstrap: str, key: bytes) -> int:
    """The largest record value (bytes, uncompressed, with ``key``) the session's broker accepts, found
    by bisection on a scratch topic between 1,000,000 and Kafka's default ``message.max.bytes``."""
    topic = f"t-largest-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=4 * 2**20)
    low, high = 1_000_000, 1_048_588
    await producer.start()
    try:
        while low < high:
            mid = (low + high + 1) // 2
            try:
                await producer.send_and_wait(topic, b"x" * mid, key=key)
                low = mid
            except KafkaError:
                high = mid - 1
    finally:
        await producer.stop()
    return low


async def test_the_largest_record_the_broker_accepts_is_dead_lettered_and_its_partition_moves_on(
    stack: Stack,
) -> None:
    # issue 13, defect 3: the dead letter of a ~1 MB bad record (base64: a third larger) was refused
    # by the producer, the failure was taken for transient and the partition was rewound for ever:
    # nothing behind it was committed and its batch's other dead letters never reached the DLQ.
    user = f"u-{uuid.uuid4().hex[:6]}"
    key = partition_key(TENANT, user)
    largest = await _largest_accepted_value(stack.bootstrap, key)
    before = valid_event(user).model_copy(update={"event_id": f"before-{user}"})
    after = valid_event(user).model_copy(
        update={"event_id": f"after-{user}", "content": "The ferry back from Hydra leaves at 17:30."}
    )
    huge = json.loads(before.model_dump_json()) | {"event_id": f"huge-{user}", "content": ""}
    huge["content"] = "y" * (largest - len(json.dumps(huge).encode()))  # over the 100,000-character limit
    value = json.dumps(huge).encode()
    assert len(value) == largest
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all", max_request_size=4 * 2**20)
    await producer.start()
    try:
        for record in (
            before.model_dump_json().encode(),
            value,
            b"{not json",
            after.model_dump_json().encode(),
        ):
            await producer.send_and_wait(str(Topic.INTERACTIONS), record, key=key)
    finally:
        await producer.stop()
    await stack.wait_caught_up(timeout_s=240)  # before the fix: the guard group never caught up

    assert sorted(turn_memories(stack, user)) == sorted([before.content, after.content])
    letters = [e for e in await dlq.load(stack.bootstrap, stage="guard") if e.letter.key == key.decode()]
    assert len(letters) == 2  # the batch's other dead letter arrived too
    (big,) = [e for e in letters if e.letter.original_size == len(value)]
    (small,) = [e for e in letters if e is not big]
    assert big.letter.original_truncated
    assert big.letter.original_sha256 == hashlib.sha256(value).hexdigest()
    assert value.startswith(big.original)
    assert len(big.original) > 500_000  # as much of the record as fits is kept
    assert len(big.letter.model_dump_json().encode()) <= DEAD_LETTER_MAX_BYTES
    assert "content" in big.letter.reason
    assert small.original == b"{not json"
    assert not small.letter.original_truncated

    refused = await asyncio.to_thread(
        CliRunner().invoke, app, ["dlq", "replay", big.id, "--bootstrap", stack.bootstrap]
    )
    assert refused.exit_code == 2
    assert "--fixed" in refused.output  # a truncated record cannot be replayed as is


class _Item(BaseModel):
    n: int
    size: int = 0


class _Echo(BaseModel):
    n: int
    pad: str


class _EchoStage:
    """A stage whose record ``{n, size}`` publishes one output of ``size`` bytes: the logic under test
    is the runtime's (:func:`run_batch`), over the real broker and producer."""

    name = "echo-test"

    def __init__(self, output_topic: str) -> None:
        self.output_topic = output_topic
        self.batches: list[list[int]] = []

    def parse(self, topic: str, raw: bytes) -> _Item:
        return _Item.model_validate_json(raw)

    async def handle(self, batch: Sequence[Envelope[_Item]], out: EventPublisher) -> Sequence[Rejection]:
        self.batches.append([env.event.n for env in batch])
        for env in batch:
            out.send(self.output_topic, env.key, _Echo(n=env.event.n, pad="x" * env.event.size))
        return ()


async def test_a_record_whose_output_is_refused_for_good_is_isolated_and_the_rest_of_its_batch_goes_on(
    kafka_bootstrap: str, unique_topic_prefix: str
) -> None:
    # issue 13, defect 3: a refused publish was taken for transient, so the whole batch was retried
    # and rewound for ever. Now the batch is handled again one record at a time: only the record whose
    # output can never be published is dead-lettered (OutputRefusedError); the others' outputs are
    # published and run_batch returns, so the caller commits.
    source, output = f"{unique_topic_prefix}.in", f"{unique_topic_prefix}.out"
    key = f"{TENANT}:{unique_topic_prefix}".encode()
    sizes = [10, 10, 2 * 2**20, 10, 10]  # record 2's output is over the producer's 1 MiB maximum
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for n, size in enumerate(sizes):
            await producer.send_and_wait(source, _Item(n=n, size=size).model_dump_json().encode(), key=key)
    finally:
        await producer.stop()
    records = await read_topic(kafka_bootstrap, source, timeout_s=120)
    assert [_Item.model_validate_json(r.value).n for r in records] == [0, 1, 2, 3, 4]

    broker = make_broker(KafkaSettings(), kafka_bootstrap)
    await broker.connect()
    stage = _EchoStage(output)
    try:
        async with asyncio.timeout(120):
            await run_batch(stage, records, EventPublisher(broker), first_backoff_s=0.01)
    finally:
        await broker.stop()

    assert stage.batches == [[0, 1, 2, 3, 4], [0], [1], [2], [3], [4]]  # not retried whole: isolated
    echoed = [_Echo.model_validate_json(r.value).n for r in await read_topic(kafka_bootstrap, output)]
    assert set(echoed) == {0, 1, 3, 4}  # at least once each (the first attempt may have sent some)
    letters = [e for e in await dlq.load(kafka_bootstrap, stage=stage.name) if e.letter.key == key.decode()]
    assert len(letters) == 1
    (refused,) = letters
    assert refused.letter.error_type == "OutputRefusedError"
    assert (refused.letter.topic, refused.letter.offset) == (source, records[2].offset)
    assert json.loads(refused.original) == {"n": 2, "size": sizes[2]}
    assert "refused" in refused.letter.reason

"""Broker plumbing against real brokers: Apache Kafka 4.4 (session fixture) and Tansu.

Covers keyed produce / grouped consume with manual commit, consumer lag before and after the
commit, and FastStream 0.7.8 batch subscribers that commit only after the handler returns.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from faststream.middlewares import AckPolicy

from hindsight.brokers import KafkaServer, TansuBroker, consumer_lag, ensure_topics, wait_for_zero_lag
from hindsight.errors import ConfigurationError, RetryableError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KEYS = [f"tenant:user-{i}".encode() for i in range(5)]
PER_KEY = 6
WAIT_S = 30.0


@pytest.fixture(scope="module")
def tansu_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker for this module only (the session broker is real Kafka by default)."""
    with TansuBroker(tmp_path_factory.mktemp("tansu-smoke")) as broker:
        assert broker.startup_s is not None
        assert broker.startup_s < 5
        yield broker.bootstrap


async def _produce_keyed(bootstrap: str, topic: str) -> int:
    """Send PER_KEY messages for each key, value ``b"<key>|<seq>"``; return how many were sent."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10_000)
    try:
        async with asyncio.timeout(WAIT_S):
            await producer.start()
            sends = [
                await producer.send(
                    topic, key + b"|" + str(seq).encode(), key=key, headers=[("seq", b"%d" % seq)]
                )
                for seq in range(PER_KEY)
                for key in KEYS
            ]
            await asyncio.gather(*sends)
    finally:
        await producer.stop()
    return len(sends)


async def _keyed_roundtrip(bootstrap: str, prefix: str, *, session_timeout_ms: int) -> None:
    topic, group = f"{prefix}.events", f"{prefix}.group"
    assert await ensure_topics(bootstrap, {topic: 3}) == {topic: 3}
    assert await ensure_topics(bootstrap, {topic: 3}) == {topic: 3}  # idempotent
    sent = await _produce_keyed(bootstrap, topic)
    assert await consumer_lag(bootstrap, group, [topic]) == sent

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=500,
    )
    by_key: dict[bytes, list[int]] = defaultdict(list)
    try:
        async with asyncio.timeout(WAIT_S):
            await consumer.start()
            received = 0
            while received < sent:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    for record in records:
                        assert record.key is not None
                        assert record.value is not None
                        key, seq = record.value.rsplit(b"|", 1)
                        assert key == record.key
                        assert dict(record.headers)["seq"] == seq
                        by_key[record.key].append(int(seq))
                        received += 1
            assert await consumer_lag(bootstrap, group, [topic]) == sent  # consumed, not committed
            await consumer.commit()
    finally:
        await consumer.stop()

    assert dict(by_key) == {key: list(range(PER_KEY)) for key in KEYS}
    assert await consumer_lag(bootstrap, group, [topic]) == 0
    await wait_for_zero_lag(bootstrap, {group: [topic]}, timeout_s=10, poll_s=0.1)


async def test_kafka_keyed_roundtrip_and_lag(kafka_bootstrap: str, unique_topic_prefix: str) -> None:
    """Real Kafka: key order per partition, lag = all before commit, 0 after."""
    await _keyed_roundtrip(kafka_bootstrap, unique_topic_prefix, session_timeout_ms=6000)


async def test_tansu_keyed_roundtrip_and_lag(tansu_bootstrap: str, unique_topic_prefix: str) -> None:
    """Tansu smoke test: same contract as real Kafka."""
    await _keyed_roundtrip(tansu_bootstrap, unique_topic_prefix, session_timeout_ms=2000)


async def test_wait_for_zero_lag_names_lagging_groups(kafka_bootstrap: str, unique_topic_prefix: str) -> None:
    topic, group = f"{unique_topic_prefix}.events", f"{unique_topic_prefix}.idle"
    await ensure_topics(kafka_bootstrap, {topic: 2})
    sent = await _produce_keyed(kafka_bootstrap, topic)
    with pytest.raises(TimeoutError, match=rf"{group}': {sent}"):
        await wait_for_zero_lag(kafka_bootstrap, {group: [topic]}, timeout_s=1.5, poll_s=0.1)


async def test_missing_topic_has_no_lag(kafka_bootstrap: str, unique_topic_prefix: str) -> None:
    topic = f"{unique_topic_prefix}.created-now"
    assert await consumer_lag(kafka_bootstrap, f"{unique_topic_prefix}.g", [topic]) == 0


def test_kafka_server_reports_missing_jars(tmp_path: Path) -> None:
    server = KafkaServer(tmp_path / "work", kafka_home=tmp_path / "nowhere")
    with pytest.raises(ConfigurationError, match=r"infra/kafka/fetch\.sh"):
        server.start()
    assert not server.running


def test_kafka_server_reports_missing_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HINDSIGHT_JAVA", "JAVA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"no java executable.*infra/kafka/fetch\.sh"):
        KafkaServer(tmp_path / "work").start()


def _earliest_by_partition(
    batch: list[tuple[str, int, int, bytes | None, dict[str, bytes]]],
) -> dict[int, int]:
    earliest: dict[int, int] = {}
    for _, partition, offset, _, _ in batch:
        earliest[partition] = min(offset, earliest.get(partition, offset))
    return earliest


@pytest.mark.parametrize("which", ["kafka", "tansu"])
async def test_faststream_batch_commits_only_after_handler_success(
    which: str, kafka_bootstrap: str, tansu_bootstrap: str, unique_topic_prefix: str
) -> None:
    """``batch=True`` + ``ack_policy=AckPolicy.NACK_ON_ERROR``: a raising handler commits nothing
    (the batch is sought back and redelivered); a returning handler commits the batch."""
    bootstrap = kafka_bootstrap if which == "kafka" else tansu_bootstrap
    topic, group = f"{unique_topic_prefix}.batch", f"{unique_topic_prefix}.batch-group"
    await ensure_topics(bootstrap, {topic: 2})
    sent = await _produce_keyed(bootstrap, topic)

    failing = True
    attempts: list[list[tuple[str, int, int, bytes | None, dict[str, bytes]]]] = []
    handled: list[tuple[str, int, int, bytes | None, dict[str, bytes]]] = []
    redelivered = asyncio.Event()

    broker = KafkaBroker(bootstrap, logger=None)

    @broker.subscriber(
        topic,
        group_id=group,
        batch=True,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        auto_offset_reset="earliest",
        max_records=100,
        batch_timeout_ms=100,
        session_timeout_ms=6000 if which == "kafka" else 2000,
        heartbeat_interval_ms=500,
    )
    async def handle(bodies: list[bytes], msg: KafkaMessage) -> None:
        records = msg.raw_message  # tuple[aiokafka.ConsumerRecord, ...], aligned with bodies
        assert isinstance(records, tuple)
        assert len(records) == len(bodies) == len(msg.batch_headers)
        batch = [(r.topic, r.partition, r.offset, r.key, dict(r.headers)) for r in records]
        attempts.append(batch)
        if len(attempts) >= 3:
            redelivered.set()
        if failing:
            await asyncio.sleep(0.05)  # keep the redelivery loop from spinning
            raise RetryableError("store down")
        handled.extend(batch)

    async with asyncio.timeout(60):
        await broker.start()
        try:
            async with asyncio.timeout(WAIT_S):
                await redelivered.wait()  # failed twice, delivered again: nothing was skipped
            assert await consumer_lag(bootstrap, group, [topic]) == sent
            failing = False
            await wait_for_zero_lag(bootstrap, {group: [topic]}, timeout_s=WAIT_S, poll_s=0.1)
        finally:
            await broker.stop()

    # A nacked batch is sought back to its earliest offset per partition: redelivered, not skipped.
    first, second = _earliest_by_partition(attempts[0]), _earliest_by_partition(attempts[1])
    assert all(second[p] == first[p] for p in first.keys() & second.keys())
    assert len({(t, p, o) for t, p, o, _, _ in handled}) == sent
    for handled_topic, _, _, key, headers in handled:
        assert handled_topic == topic
        assert key in KEYS
        assert set(headers) >= {"seq"}
    assert await consumer_lag(bootstrap, group, [topic]) == 0

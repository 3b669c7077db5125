"""Async admin helpers over aiokafka: create (and, in tests, delete) topics, measure consumer-group
lag, wait for lag 0, read committed offsets and group assignments, read a whole topic.

They work against real Apache Kafka 4.x and against Tansu: only Metadata, CreateTopics,
FindCoordinator, OffsetFetch (always naming partitions), ListOffsets and Fetch requests are used
(no DeleteRecords, CreatePartitions or offsets_for_times, which Tansu lacks). End offsets come from
a Fetch response's high watermark, because Tansu 0.6's ListOffsets(latest) is wrong after batched
produces (it answers the last batch's base offset + 1).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, OffsetAndMetadata, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from hindsight.errors import ConfigurationError, StoreUnavailableError

_NO_ERROR = 0


@asynccontextmanager
async def _admin(bootstrap: str, timeout_s: float) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000))
    try:
        async with asyncio.timeout(timeout_s):
            await admin.start()
        yield admin
    finally:
        await admin.close()


async def ensure_topics(
    bootstrap: str,
    specs: Mapping[str, int],
    *,
    replication_factor: int = 1,
    timeout_s: float = 30.0,
) -> dict[str, int]:
    """Create every topic of ``specs`` (name -> partitions) that does not exist yet; idempotent.

    An existing topic is left as it is, whatever its partition count (the returned mapping says
    what it has). Waits until every topic's partitions all have a leader.

    :param bootstrap: ``host:port[,host:port]`` of the cluster.
    :param specs: topic name -> number of partitions for topics to create.
    :param replication_factor: replicas of each created topic (1 on a single node).
    :param timeout_s: seconds for the whole operation.
    :returns: topic name -> partition count now in the cluster.
    :raises ConfigurationError: the broker refused a topic as invalid (bad name, partitions, ...).
    :raises StoreUnavailableError: the broker failed or did not answer within ``timeout_s``.
    """
    try:
        async with asyncio.timeout(timeout_s), _admin(bootstrap, timeout_s) as admin:
            existing = set(await admin.list_topics())
            missing = [
                NewTopic(name, partitions, replication_factor)
                for name, partitions in specs.items()
                if name not in existing
            ]
            if missing:
                response = await admin.create_topics(missing)
                _raise_create_errors(response.topic_errors)
            return await _wait_for_leaders(admin, list(specs))
    except TimeoutError as error:
        raise StoreUnavailableError(
            f"ensure_topics on {bootstrap} did not finish in {timeout_s} s"
        ) from error
    except KafkaError as error:
        raise StoreUnavailableError(f"ensure_topics on {bootstrap} failed: {error!r}") from error


def _raise_create_errors(topic_errors: Iterable[tuple[Any, ...]]) -> None:
    """Raise for CreateTopics per-topic errors other than TopicAlreadyExists (a concurrent creator)."""
    for entry in topic_errors:
        name, code = entry[0], entry[1]
        if code in (_NO_ERROR, TopicAlreadyExistsError.errno):
            continue
        error_class = for_code(code)
        detail = entry[2] if len(entry) > 2 and entry[2] else error_class.__name__
        if error_class.retriable:
            raise StoreUnavailableError(f"creating topic {name!r} failed: {detail}")
        raise ConfigurationError(f"creating topic {name!r} was refused: {detail}")


async def _wait_for_leaders(
    admin: AIOKafkaAdminClient, topics: list[str], poll_s: float = 0.1
) -> dict[str, int]:
    """Poll metadata until each topic exists with a leader on every partition (the caller bounds time)."""
    while True:
        counts: dict[str, int] = {}
        for topic in await admin.describe_topics(topics):
            partitions = topic["partitions"]
            if topic["error_code"] == _NO_ERROR and partitions and all(p["leader"] >= 0 for p in partitions):
                counts[topic["topic"]] = len(partitions)
        if len(counts) == len(set(topics)):
            return counts
        await asyncio.sleep(poll_s)


class LagReader:
    """One admin client (committed offsets) and one group-less consumer (log start and end offsets);
    made by :func:`lag_reader` for repeated measurements."""

    def __init__(self, admin: AIOKafkaAdminClient, offsets: AIOKafkaConsumer) -> None:
        self._admin = admin
        self._offsets = offsets

    async def partitions(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Partitions of the ``topics`` that exist (a missing topic has none)."""
        found: list[TopicPartition] = []
        for topic in await self._admin.describe_topics(sorted(set(topics))):
            if topic["error_code"] == _NO_ERROR:
                found.extend(TopicPartition(topic["topic"], p["partition"]) for p in topic["partitions"])
        return found

    async def _committed(
        self, group_id: str, partitions: list[TopicPartition], retry_s: float = 0.2
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets (``-1``: none), retrying retriable errors such as a coordinator not
        elected yet on a fresh Kafka (the caller bounds the time). Partitions are always named:
        Tansu drops the connection on an OffsetFetch for all partitions."""
        while True:
            try:
                offsets: dict[
                    TopicPartition, OffsetAndMetadata
                ] = await self._admin.list_consumer_group_offsets(group_id, partitions=partitions)
                return offsets
            except KafkaError as error:
                if not error.retriable:
                    raise
            await asyncio.sleep(retry_s)

    async def _end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets (high watermarks) as a Fetch response reports them.

        Tansu 0.6 answers ListOffsets(latest) with the last record batch's base offset + 1, not the
        end of the log, so the listed offset only serves as the fetch position (nothing or one batch
        to read); the high watermark of the Fetch response is the answer on both brokers.
        """
        listed = await self._offsets.end_offsets(partitions)
        self._offsets.assign(partitions)  # a fresh assignment: no high watermark known yet
        for partition in partitions:
            self._offsets.seek(partition, listed[partition])
        while True:
            marks = {partition: self._offsets.highwater(partition) for partition in partitions}
            known = {partition: mark for partition, mark in marks.items() if mark is not None}
            if len(known) == len(partitions):
                return known
            await self._offsets.getmany(*partitions, timeout_ms=20)

    async def committed(self, group_id: str, topics: Iterable[str]) -> dict[TopicPartition, int]:
        """Offsets ``group_id`` committed on the partitions of ``topics`` (``-1``: none yet)."""
        partitions = await self.partitions(topics)
        if not partitions:
            return {}
        committed = await self._committed(group_id, partitions)
        return {tp: (committed[tp].offset if tp in committed else -1) for tp in partitions}

    async def lag(self, group_id: str, topics: Iterable[str]) -> dict[TopicPartition, int]:
        """Per-partition lag of ``group_id`` on ``topics`` (see :func:`consumer_lag`)."""
        partitions = await self.partitions(topics)
        if not partitions:
            return {}
        committed = await self._committed(group_id, partitions)
        ends = await self._end_offsets(partitions)
        starts = await self._offsets.beginning_offsets(partitions)
        lags: dict[TopicPartition, int] = {}
        for partition in partitions:
            meta = committed.get(partition)
            done = meta.offset if meta is not None and meta.offset >= 0 else starts[partition]
            lags[partition] = max(0, ends[partition] - done)
        return lags


@asynccontextmanager
async def lag_reader(bootstrap: str, timeout_s: float = 30.0) -> AsyncIterator[LagReader]:
    """A reusable :class:`LagReader` for repeated measurements: ``await reader.lag(group_id, topics)``
    -> per-partition lag as :func:`consumer_lag` measures it, ``await reader.committed(...)`` ->
    committed offsets (``timeout_s`` bounds each request and the start). Its calls
    raise aiokafka's ``KafkaError`` on broker errors; callers bound the time of each.
    """
    async with _lag_reader(bootstrap, timeout_s) as reader:
        yield reader


@asynccontextmanager
async def _lag_reader(bootstrap: str, timeout_s: float) -> AsyncIterator[LagReader]:
    async with _admin(bootstrap, timeout_s) as admin:
        offsets = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            request_timeout_ms=int(timeout_s * 1000),
            fetch_max_wait_ms=10,  # only the high watermark of a fetch is wanted, not its data
            max_partition_fetch_bytes=1,  # the broker still sends one batch: enough
        )
        try:
            async with asyncio.timeout(timeout_s):
                await offsets.start()
            yield LagReader(admin, offsets)
        finally:
            await offsets.stop()


async def consumer_lag(
    bootstrap: str, group_id: str, topics: Iterable[str], *, timeout_s: float = 30.0
) -> int:
    """Messages ``group_id`` has not committed yet on ``topics``, summed over their partitions.

    Per partition: end offset minus committed offset; with no committed offset, end offset minus
    the log start offset (everything still there). Topics that do not exist count 0.

    :param bootstrap: ``host:port[,host:port]`` of the cluster.
    :param group_id: the consumer group.
    :param topics: topic names the group consumes.
    :param timeout_s: seconds for the whole measurement.
    :returns: the lag in messages (offsets), >= 0.
    :raises StoreUnavailableError: the broker failed or did not answer within ``timeout_s``.
    """
    try:
        async with asyncio.timeout(timeout_s), _lag_reader(bootstrap, timeout_s) as reader:
            return sum((await reader.lag(group_id, topics)).values())
    except TimeoutError as error:
        raise StoreUnavailableError(f"consumer_lag on {bootstrap} did not finish in {timeout_s} s") from error
    except KafkaError as error:
        raise StoreUnavailableError(
            f"consumer_lag of {group_id!r} on {bootstrap} failed: {error!r}"
        ) from error


async def wait_for_zero_lag(
    bootstrap: str,
    groups: Mapping[str, list[str]],
    *,
    timeout_s: float = 60.0,
    poll_s: float = 0.2,
) -> None:
    """Return once every consumer group has committed everything on its topics (lag 0 for all).

    Broker errors while polling (e.g. a coordinator still loading) are retried until the deadline.

    :param bootstrap: ``host:port[,host:port]`` of the cluster.
    :param groups: group id -> topic names it consumes.
    :param timeout_s: seconds to wait in total.
    :param poll_s: seconds between measurements.
    :raises TimeoutError: some group still lags after ``timeout_s``; the message lists each lagging
        group with its lag (or the last broker error).
    :raises StoreUnavailableError: the broker could not be reached at all.
    """
    lagging: dict[str, int | str] = dict.fromkeys(groups, "not measured")
    try:
        async with asyncio.timeout(timeout_s), _lag_reader(bootstrap, timeout_s) as reader:
            while True:
                current: dict[str, int | str] = {}
                for group_id, topics in groups.items():
                    try:
                        lag = sum((await reader.lag(group_id, topics)).values())
                    except KafkaError as error:
                        current[group_id] = repr(error)
                        continue
                    if lag:
                        current[group_id] = lag
                lagging = current
                if not lagging:
                    return
                await asyncio.sleep(poll_s)
    except KafkaError as error:
        raise StoreUnavailableError(f"wait_for_zero_lag could not reach {bootstrap}: {error!r}") from error
    except TimeoutError as error:
        raise TimeoutError(
            f"consumer groups still lagging on {bootstrap} after {timeout_s} s: {lagging}"
        ) from error


async def committed_offsets(
    bootstrap: str, group_id: str, topics: Iterable[str], *, timeout_s: float = 30.0
) -> dict[TopicPartition, int]:
    """The offsets ``group_id`` committed on every partition of ``topics`` (``-1``: none yet).

    :param bootstrap: ``host:port[,host:port]`` of the cluster.
    :param group_id: the consumer group.
    :param topics: topic names (missing topics contribute nothing).
    :param timeout_s: seconds for the whole call.
    :returns: partition -> next offset the group will read.
    :raises StoreUnavailableError: the broker failed or did not answer within ``timeout_s``.
    """
    try:
        async with asyncio.timeout(timeout_s), _lag_reader(bootstrap, timeout_s) as reader:
            return await reader.committed(group_id, topics)
    except (TimeoutError, KafkaError) as error:
        raise StoreUnavailableError(f"committed_offsets of {group_id!r} on {bootstrap}: {error!r}") from error


@dataclass(frozen=True)
class GroupState:
    """A consumer group as the coordinator describes it: ``state`` (``Stable``,
    ``PreparingRebalance``, ``CompletingRebalance``, ``Empty``, ``Dead``) and each member's partitions."""

    state: str
    members: dict[str, frozenset[TopicPartition]]

    @property
    def stable(self) -> bool:
        """True when no rebalance is in progress."""
        return self.state == "Stable"


async def describe_group(bootstrap: str, group_id: str, *, timeout_s: float = 30.0) -> GroupState:
    """Members of ``group_id`` and the partitions assigned to each (classic consumer protocol).
    Retriable broker errors (no coordinator yet on a fresh cluster) are retried until ``timeout_s``.

    :raises StoreUnavailableError: the broker failed, answered with an error, or did not answer
        within ``timeout_s``.
    """
    try:
        async with asyncio.timeout(timeout_s), _admin(bootstrap, timeout_s) as admin:
            while True:  # a fresh cluster has no group coordinator until __consumer_offsets is loaded
                try:
                    group = (await admin.describe_consumer_groups([group_id]))[0].groups[0]
                    if group[0] == _NO_ERROR:
                        break
                    raise for_code(group[0])(f"describe_group {group_id!r}")
                except KafkaError as error:
                    if not error.retriable:
                        raise
                await asyncio.sleep(0.2)
    except (TimeoutError, KafkaError) as error:
        raise StoreUnavailableError(f"describe_group {group_id!r} on {bootstrap}: {error!r}") from error
    state, members = group[2], group[5]
    assigned: dict[str, frozenset[TopicPartition]] = {}
    for member in members:
        member_id, blob = member[0], member[-1]
        parts: set[TopicPartition] = set()
        if blob:
            for topic, numbers in ConsumerProtocolMemberAssignment.decode(blob).assignment:
                parts.update(TopicPartition(topic, n) for n in numbers)
        assigned[member_id] = frozenset(parts)
    return GroupState(state=state, members=assigned)


async def read_topic(
    bootstrap: str, topic: str, *, timeout_s: float = 60.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic`` from the log start to its end at the time of the call, ordered
    by partition then offset (no consumer group; nothing is committed). A missing topic is empty.

    :raises StoreUnavailableError: the broker failed or the read did not finish within ``timeout_s``.
    """
    try:
        async with asyncio.timeout(timeout_s), _lag_reader(bootstrap, timeout_s) as reader:
            partitions = await reader.partitions([topic])
            if not partitions:
                return []
            ends = await reader._end_offsets(partitions)
            consumer = reader._offsets
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            out: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {tp: [] for tp in partitions}
            todo = {tp for tp in partitions if ends[tp] > 0}
            while todo:
                for tp in list(todo):
                    if await consumer.position(tp) >= ends[tp]:
                        todo.discard(tp)
                if not todo:
                    break
                batch = await consumer.getmany(*todo, timeout_ms=200)
                for tp, records in batch.items():
                    out[tp].extend(r for r in records if r.offset < ends[tp])
    except (TimeoutError, KafkaError) as error:
        raise StoreUnavailableError(f"read_topic {topic!r} on {bootstrap}: {error!r}") from error
    return [rec for tp in sorted(out) for rec in out[tp]]


async def delete_topics(bootstrap: str, topics: Iterable[str], *, timeout_s: float = 30.0) -> None:
    """Delete ``topics`` (missing ones are ignored) and wait until the cluster no longer lists them.

    Real Kafka only (tests use it to start from empty topics); never on a shared cluster.

    :raises StoreUnavailableError: the broker failed or did not finish within ``timeout_s``.
    """
    names = set(topics)
    try:
        async with asyncio.timeout(timeout_s), _admin(bootstrap, timeout_s) as admin:
            present = names & set(await admin.list_topics())
            if present:
                await admin.delete_topics(sorted(present))
            while True:
                if not names & set(await admin.list_topics()):
                    return
                await asyncio.sleep(0.1)
    except (TimeoutError, KafkaError) as error:
        raise StoreUnavailableError(f"delete_topics on {bootstrap}: {error!r}") from error

"""Build the AppCDS class archive that halves the embedded Kafka broker's start-up.

A JVM spends most of a Kafka broker's start-up loading and verifying ~6,000 classes from 45 jars.
Class Data Sharing (JDK 13+, dynamic archive: ``-XX:ArchiveClassesAtExit``) records them once, in a
training run, into a memory-mapped archive that later starts map instead of parsing (measured on 2
shared cores: start 9-12 s -> 3.5 s, format 2.6 s -> 1.1 s; ``hindsight bench broker``).

The training run starts a broker in a scratch directory, creates a topic, produces and consumes
through a consumer group (so the request paths are loaded too), stops it with SIGTERM (the JVM
writes the archive at exit) and moves the archive to :func:`default_class_archive` atomically. An
archive fits one JVM build and one set of jars: the JVM checks both and silently starts without it
when they changed (then run this again). ``scripts/setup.sh`` runs it after fetching the jars.

Usage: ``python -m hindsight.brokers.prepare [--force]`` (prints the archive path).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import tempfile
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hindsight.brokers.admin import ensure_topics
from hindsight.brokers.kafka_server import (
    LEAN_JVM_OPTIONS,
    KafkaServer,
    default_class_archive,
    default_kafka_home,
    find_java,
)

_TRAINING_RECORDS = 200


async def _exercise(bootstrap: str) -> None:
    """Create a topic, produce, consume in a group and commit: the paths a real client takes."""
    await ensure_topics(bootstrap, {"cds-training": 2})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for k in range(_TRAINING_RECORDS):
            await producer.send("cds-training", b"x" * 100, key=b"%d" % (k % 7))
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "cds-training",
        bootstrap_servers=bootstrap,
        group_id="cds-training",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        seen = 0
        async with asyncio.timeout(60):
            while seen < _TRAINING_RECORDS:
                batches = await consumer.getmany(timeout_ms=1000)
                seen += sum(len(records) for records in batches.values())
        await consumer.commit()
    finally:
        await consumer.stop()


def build_class_archive(
    *, kafka_home: Path | None = None, java: str | None = None, force: bool = False
) -> Path:
    """Write the class archive of the broker for ``java`` (default :func:`find_java`) and the jars in
    ``kafka_home``; return its path. Skips the work when it exists, unless ``force``.

    Raises:
        ConfigurationError: java or the jars are missing.
        StoreUnavailableError: the training broker did not start.
        RuntimeError: the JVM wrote no archive.
    """
    java = java or find_java()
    home = kafka_home if kafka_home is not None else default_kafka_home()
    target = default_class_archive(java, home)
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".training-", dir=target.parent) as scratch:
        staging = Path(scratch) / "kafka.jsa"  # beside the target: os.replace stays on one file system
        server = KafkaServer(
            Path(scratch) / "broker",
            num_partitions=2,
            kafka_home=home,
            java=java,
            jvm_options=(*LEAN_JVM_OPTIONS, f"-XX:ArchiveClassesAtExit={staging}"),
            use_class_archive=False,
            stop_timeout_s=120.0,
        )
        with server:
            asyncio.run(_exercise(server.bootstrap))
        if not staging.is_file():
            raise RuntimeError(f"the JVM wrote no class archive; see {server.log_path}")
        os.replace(staging, target)
    return target


def main() -> None:
    """Command line: build the archive (``--force`` rebuilds it) and print its path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the archive exists")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # coordinator-not-ready chatter while it boots
    print(build_class_archive(force=args.force))


if __name__ == "__main__":
    main()

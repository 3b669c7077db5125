"""Agents in Java and C publish to the embedded default (issue 13, defect 11).

A real ``hindsight up`` (the embedded default: Apache Kafka 4.4) receives interaction events from
Apache Kafka's own console producer (Java client, from the jars ``infra/kafka/fetch.sh`` fetches)
and from kcat (librdkafka, Debian), both with ``acks=all``; each becomes a memory readable through
the gateway. A malformed record sent by kcat is dead-lettered, and kcat reads the dead letter back
from ``memory.dlq.v1``. Tansu failed both clients at the API-versions handshake.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from bench.up import UpProcess
from hindsight.brokers.kafka_server import kafka_tool_argv
from hindsight.ids import turn_memory_id
from schemas import InteractionEvent, Topic, partition_key

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

KEY = "interop-key"
TENANT = "interop"
WAIT_S = 180.0


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    env = {"HINDSIGHT_GATEWAY_API_KEYS": f"{KEY}={TENANT}", "HINDSIGHT_LOG_LEVEL": "WARNING"}
    with UpProcess(tmp_path_factory.mktemp("interop") / "data", env) as process:
        yield process


def _event(user: str, content: str) -> InteractionEvent:
    return InteractionEvent(
        tenant_id=TENANT,
        user_id=user,
        agent_id="java-agent",
        session_id="interop",
        event_id=f"interop-{uuid.uuid4().hex}",
        occurred_at=datetime.now(UTC),
        source="user",
        content=content,
    )


def _line(event: InteractionEvent) -> bytes:
    """``key|value``: the keyed line both tools read (``key.separator`` / ``-K``)."""
    return partition_key(event.tenant_id, event.user_id) + b"|" + event.model_dump_json().encode()


def _wait_for_memory(up: UpProcess, event: InteractionEvent) -> dict[str, object]:
    memory_id = turn_memory_id(TENANT, event.event_id)
    deadline = time.monotonic() + WAIT_S
    with httpx.Client(base_url=up.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
        while time.monotonic() < deadline:
            answer = http.get(f"/v1/memories/{memory_id}")
            if answer.status_code == 200:
                body: dict[str, object] = answer.json()["memory"]
                return body
            time.sleep(0.2)
    raise AssertionError(f"{event.event_id} did not become a memory within {WAIT_S} s")


def _kcat() -> str:
    kcat = shutil.which("kcat")
    assert kcat, "kcat missing: scripts/setup.sh --test installs it (apt-get install kcat)"
    return kcat


def test_the_kafka_console_producer_publishes_a_memory(up: UpProcess) -> None:
    event = _event("user-java", "I prefer aisle seats because my knee hurts on long flights.")
    produced = subprocess.run(
        [
            *kafka_tool_argv("org.apache.kafka.tools.ConsoleProducer"),
            "--bootstrap-server",
            up.bootstrap,
            "--topic",
            str(Topic.INTERACTIONS),
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=|",
            "--producer-property",
            "acks=all",
        ],
        input=_line(event) + b"\n",
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")[-3000:]
    memory = _wait_for_memory(up, event)
    assert memory["content"] == event.content
    assert memory["agent_id"] == "java-agent"


def test_kcat_publishes_a_memory_and_reads_back_the_dead_letter_of_a_bad_record(up: UpProcess) -> None:
    kcat = _kcat()
    event = _event("user-c", "我的自行车锁密码写在车库门后的便签上，颜色是绿色的。我喜欢骑车上班。")
    bad_key = f"{TENANT}:user-c-{uuid.uuid4().hex[:6]}".encode()
    produced = subprocess.run(
        [kcat, "-b", up.bootstrap, "-t", str(Topic.INTERACTIONS), "-P", "-K", "|", "-X", "acks=all"],
        input=_line(event) + b"\n" + bad_key + b'|{"not": "an interaction"}\n',
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")
    memory = _wait_for_memory(up, event)
    assert memory["content"] == event.content
    assert memory["agent_id"] == "java-agent"

    deadline = time.monotonic() + WAIT_S
    letters: list[dict[str, object]] = []
    while time.monotonic() < deadline and not letters:
        consumed = subprocess.run(
            [kcat, "-b", up.bootstrap, "-t", str(Topic.DLQ), "-C", "-o", "beginning", "-e", "-J", "-q"],
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert consumed.returncode == 0, consumed.stderr.decode(errors="replace")
        messages = [json.loads(line) for line in consumed.stdout.decode().splitlines() if line.strip()]
        letters = [json.loads(m["payload"]) for m in messages if m.get("key") == bad_key.decode()]
        time.sleep(0.5)
    assert letters, "kcat read no dead letter for the bad record"
    assert letters[0]["stage"] == "guard"
    assert letters[0]["topic"] == str(Topic.INTERACTIONS)
    assert "event_id" in str(letters[0]["reason"])  # names the missing fields


def test_the_tools_jar_sits_beside_the_broker_jars() -> None:
    argv = kafka_tool_argv("org.apache.kafka.tools.ConsoleProducer")
    classpath = argv[argv.index("-cp") + 1]
    assert all(Path(part.rstrip("*")).exists() for part in classpath.split(":"))

"""Clients other than Python's reach a running embedded default (issue 13, defects 8 and 11).

A real ``hindsight up`` (the embedded default: Apache Kafka 4.4) receives interaction events from
Apache Kafka's own console producer (Java client, from the jars ``infra/kafka/fetch.sh`` fetches)
and from kcat (librdkafka, Debian), both with ``acks=all``; each becomes a memory readable through
the gateway. A malformed record sent by kcat is dead-lettered, and kcat reads the dead letter back
from ``memory.dlq.v1``. Tansu failed both clients at the API-versions handshake.

An MCP client on stdio (``hindsight mcp-stdio`` with the same data directory) works against the
running service through the gateway: the same tools, the tenant of its key, nothing opened twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from bench.up import UpProcess, hindsight_argv
from hindsight.brokers.kafka_server import kafka_tool_argv
from hindsight.ids import turn_memory_id
from schemas import InteractionEvent, Topic, partition_key

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

KEY = "interop-key"
TENANT = "interop"
OTHER_KEY = "interop-other-key"
WAIT_S = 180.0


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    env = {
        "HINDSIGHT_GATEWAY_API_KEYS": f"{KEY}={TENANT},{OTHER_KEY}=interop-other",
        "HINDSIGHT_LOG_LEVEL": "WARNING",
    }
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


def _stdio(up: UpProcess, key: str) -> StdioServerParameters:
    """``hindsight mcp-stdio`` beside the running ``up``: only the data directory and the key."""
    env = {**os.environ, "HINDSIGHT_DATA_DIR": str(up.data_dir), "HINDSIGHT_API_KEY": key}
    for name in ("HINDSIGHT_GATEWAY_URL", "HINDSIGHT_KAFKA_BOOTSTRAP", "HINDSIGHT_GATEWAY_API_KEYS"):
        env.pop(name, None)
    argv = hindsight_argv()
    return StdioServerParameters(command=argv[0], args=[*argv[1:], "mcp-stdio"], env=env)


async def _stdio_session(up: UpProcess) -> tuple[set[str], set[str], dict[str, object], list[str], list[str]]:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{up.url}/mcp", http_client=http)) as direct,
    ):
        over_http = {tool.name for tool in (await direct.list_tools()).tools}
    async with Client(_stdio(up, KEY)) as client:
        over_stdio = {tool.name for tool in (await client.list_tools()).tools}
        accepted = await client.call_tool(
            "retain",
            {
                "user_id": "user-mcp",
                "session_id": "s-mcp",
                "content": "I prefer oat milk in my morning coffee.",
            },
        )
        assert not accepted.is_error, accepted.content
        assert accepted.structured_content is not None
        event_id = str(accepted.structured_content["event_id"])
        contents: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not contents:
            found = await client.call_tool("recall", {"user_id": "user-mcp", "query": "what milk do I like?"})
            assert not found.is_error, found.content
            assert found.structured_content is not None
            contents = [str(m["content"]) for m in found.structured_content["memories"]]
            await asyncio.sleep(0.5)
    async with Client(_stdio(up, OTHER_KEY)) as other:
        seen = await other.call_tool("recall", {"user_id": "user-mcp", "query": "what milk do I like?"})
        assert seen.structured_content is not None
        other_contents = [str(m["content"]) for m in seen.structured_content["memories"]]
    return over_http, over_stdio, {"event_id": event_id}, contents, other_contents


def test_mcp_over_stdio_works_against_the_running_hindsight_through_its_gateway(up: UpProcess) -> None:
    over_http, over_stdio, accepted, contents, other_contents = asyncio.run(
        asyncio.wait_for(_stdio_session(up), WAIT_S * 2)
    )
    assert over_stdio == over_http  # the gateway's own tools, forwarded
    assert "retain" in over_stdio
    assert "I prefer oat milk in my morning coffee." in contents
    assert other_contents == []  # another key is another tenant, as over HTTP
    memory_id = turn_memory_id(TENANT, str(accepted["event_id"]))
    with httpx.Client(base_url=up.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
        assert http.get(f"/v1/memories/{memory_id}").status_code == 200
        assert http.get("/healthz").json()["status"] == "ok"  # the running store was not opened twice


def test_mcp_stdio_without_a_running_hindsight_says_what_to_start(tmp_path: Path) -> None:
    env = {**os.environ, "HINDSIGHT_DATA_DIR": str(tmp_path), "HINDSIGHT_API_KEY": KEY}
    for name in ("HINDSIGHT_GATEWAY_URL", "HINDSIGHT_KAFKA_BOOTSTRAP"):
        env.pop(name, None)
    result = subprocess.run(
        [*hindsight_argv(), "mcp-stdio"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert f"no running Hindsight on data directory {tmp_path}: start 'hindsight up" in result.stderr
    assert sys.platform.startswith("linux")

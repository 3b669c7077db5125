"""Consumer timings the embedded default applies for its broker, unless the environment sets them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hindsight.settings import KafkaSettings
from services.cli.embedded import EMBEDDED_TIMINGS, tune_for_embedded_broker

pytestmark = pytest.mark.unit

NAMES = ("fetch_max_wait_ms", "batch_timeout_ms", "consumer_timeout_ms", "session_timeout_ms")


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*NAMES, "instance_id", "embedded", "idempotent"):
        monkeypatch.delenv(f"HINDSIGHT_KAFKA_{name.upper()}", raising=False)


def _timings(kafka: KafkaSettings) -> tuple[int, ...]:
    return tuple(getattr(kafka, name) for name in NAMES)


def test_kafka_waits_event_driven_and_rejoins_as_a_static_member(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _clear(monkeypatch)
    kafka = KafkaSettings()
    assert kafka.embedded == "kafka"
    assert _timings(kafka) == (500, 100, 200, 10_000)
    assert kafka.instance_id == ""
    assert not kafka.idempotent
    tune_for_embedded_broker(kafka, tmp_path / "a")
    assert _timings(kafka) == (5000, 5000, 10_000, 30_000)
    assert kafka.idempotent
    first = kafka.instance_id
    assert first.startswith("up-")
    again, other = KafkaSettings(), KafkaSettings()
    tune_for_embedded_broker(again, tmp_path / "a")
    tune_for_embedded_broker(other, tmp_path / "b")
    assert again.instance_id == first  # same directory: the same static members after a restart
    assert other.instance_id != first  # another directory is another process


def test_an_idle_kafka_consumer_wakes_only_for_its_fetch_answer() -> None:
    kafka = EMBEDDED_TIMINGS["kafka"]
    # aiokafka's fetch loop is woken by the answer of the fetch the broker holds: its own timeout
    # firing first would be one more idle wake-up per consumer and fetch (issue 12)
    assert kafka["consumer_timeout_ms"] > kafka["fetch_max_wait_ms"]
    # a hung consumer is still noticed within tens of seconds, three heartbeats per session
    assert kafka["session_timeout_ms"] <= 30_000


def test_tansu_is_polled_fast_and_gets_no_static_membership(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("HINDSIGHT_KAFKA_EMBEDDED", "tansu")
    kafka = KafkaSettings()
    tune_for_embedded_broker(kafka, tmp_path)
    assert _timings(kafka) == (25, 10, 200, 3000)
    assert kafka.instance_id == ""
    assert not kafka.idempotent  # Tansu has no idempotent producer
    assert set(EMBEDDED_TIMINGS) == {"kafka", "tansu"}


def test_values_from_the_environment_are_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("HINDSIGHT_KAFKA_FETCH_MAX_WAIT_MS", "200")
    monkeypatch.setenv("HINDSIGHT_KAFKA_SESSION_TIMEOUT_MS", "6000")
    monkeypatch.setenv("HINDSIGHT_KAFKA_INSTANCE_ID", "mine")
    monkeypatch.setenv("HINDSIGHT_KAFKA_IDEMPOTENT", "false")
    kafka = KafkaSettings()
    tune_for_embedded_broker(kafka, tmp_path)
    assert _timings(kafka) == (200, 5000, 10_000, 6000)
    assert kafka.instance_id == "mine"
    assert not kafka.idempotent

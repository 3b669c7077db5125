"""Consumer timings the embedded default applies for the Tansu broker, unless the environment sets them."""

from __future__ import annotations

import pytest

from hindsight.settings import KafkaSettings
from services.cli.embedded import tune_for_embedded_broker

pytestmark = pytest.mark.unit


def test_embedded_broker_polls_fast_and_joins_fast_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FETCH_MAX_WAIT_MS", "BATCH_TIMEOUT_MS", "SESSION_TIMEOUT_MS"):
        monkeypatch.delenv(f"HINDSIGHT_KAFKA_{name}", raising=False)
    kafka = KafkaSettings()
    assert (kafka.fetch_max_wait_ms, kafka.batch_timeout_ms, kafka.session_timeout_ms) == (500, 100, 10_000)
    tune_for_embedded_broker(kafka)
    assert (kafka.fetch_max_wait_ms, kafka.batch_timeout_ms, kafka.session_timeout_ms) == (25, 10, 3000)


def test_values_from_the_environment_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINDSIGHT_KAFKA_FETCH_MAX_WAIT_MS", "200")
    monkeypatch.setenv("HINDSIGHT_KAFKA_SESSION_TIMEOUT_MS", "6000")
    monkeypatch.delenv("HINDSIGHT_KAFKA_BATCH_TIMEOUT_MS", raising=False)
    kafka = KafkaSettings()
    tune_for_embedded_broker(kafka)
    assert (kafka.fetch_max_wait_ms, kafka.batch_timeout_ms, kafka.session_timeout_ms) == (200, 10, 6000)

"""``hindsight up`` refuses a busy gateway port at once, before starting any consumer."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import _key_hint, _port_free, app
from services.gateway.settings import DEV_KEY, GatewaySettings

pytestmark = pytest.mark.unit


def test_a_busy_port_is_one_clear_error_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert not _port_free("127.0.0.1", port)
        result = CliRunner().invoke(app, ["up", "--port", str(port), "--data-dir", str(tmp_path / "var")])
    assert result.exit_code == 2
    assert f"port {port} on 127.0.0.1 is in use" in result.output
    assert "--port" in result.output
    assert not (tmp_path / "var").exists()  # no store, broker or consumer was started
    assert _port_free("127.0.0.1", port)


def test_up_says_where_the_api_key_is_and_never_prints_a_configured_one() -> None:
    # a newcomer (2026-12-03, night) had to search the README for the local key
    assert DEV_KEY in _key_hint(GatewaySettings())
    secret = "k" * 40
    hint = _key_hint(GatewaySettings(api_keys={secret: {"tenant_id": "t"}}))
    assert secret not in hint
    assert "HINDSIGHT_GATEWAY_API_KEYS (1 configured)" in hint

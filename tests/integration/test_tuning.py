"""``hindsight tune`` on real ClickHouse (chDB): it refuses too little data saying how much it needs, it
finds the known answer of a synthetic population, and the tuned settings it writes are loaded by the
services at (re)start and reported in ``/healthz``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from clickhouse_connect.driver.client import Client
from typer.testing import CliRunner

from bench.tune_synthetic import Truth, generate
from hindsight.analytics.schema import SchemaNames, TtlDays
from hindsight.analytics.store import AnalyticsStore
from hindsight.runtime import make_broker, open_resources
from hindsight.settings import AllSettings, ClickHouseSettings, KafkaSettings, RuntimeSettings
from hindsight.tuning import settings_file
from hindsight.tuning.fit import DecayFit, FloorFit
from hindsight.tuning.run import Current, TuneOptions, run_and_write
from services.cli.main import app as cli
from services.evict import app as evict_app
from services.gateway.app import build_asgi
from services.gateway.settings import GatewaySettings
from services.ingest.settings import IngestSettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_tune_refuses_too_little_data_and_says_how_much_it_needs(chdb_dsn: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "tune",
            "--data-dir",
            str(tmp_path),
            "--dsn",
            chdb_dsn,
            "--database",
            f"empty_{uuid.uuid4().hex[:8]}",
        ],
    )
    assert result.exit_code == 3, result.output
    line = json.loads(result.stdout.strip().splitlines()[-1])
    floor = line["fits"]["similarity_floor"]
    assert floor["fitted"] is False
    assert floor["need"] == {"positives": 100, "negatives": 100}
    assert "POST /v1/recall/{query_id}/feedback" in floor["reason"]
    assert "needs >= 100 reuses" in line["fits"]["decay"]["all"]["reason"]
    assert line["written_version"] is None
    assert not (tmp_path / "tuning" / "tuned-settings.json").exists()
    assert (tmp_path / "tuning" / "plots" / "tuning.png").exists()  # the plots say "not fitted" too


def test_tune_finds_the_known_answer_of_a_synthetic_population(
    clickhouse_client: Client, tmp_path: Path
) -> None:
    names = SchemaNames(f"syn_{uuid.uuid4().hex[:8]}", ttl=TtlDays(3650, 3650, 3650, 3650))
    store = AnalyticsStore(clickhouse_client, names)
    store.migrate()
    truth = Truth()
    generate(store, truth, target_candidates=60_000, seed=3)
    path = tmp_path / "tuning" / "tuned-settings.json"
    outcome = run_and_write(store, TuneOptions(), Current(), tuned_path=path, plots_dir=None, write=True)
    floor = outcome.report.floor
    assert isinstance(floor, FloorFit)
    assert floor.floor == pytest.approx(truth.floor(), abs=0.03)
    for name, spec in truth.types.items():
        fit = outcome.report.decay[name]
        assert isinstance(fit, DecayFit), fit
        assert fit.half_life_days == pytest.approx(spec.half_life_days, rel=0.25)
    assert outcome.written is not None
    doc = settings_file.load(path)
    assert doc is not None
    assert doc.version == 1
    assert doc.values.similarity_floor == pytest.approx(floor.floor)
    assert set(doc.values.decay_per_day_by_type or {}) == {"episodic", "semantic"}
    report = json.loads((path.parent / "report.json").read_text())
    assert report["written_version"] == 1
    assert {p.name for p in (path.parent / "plots").iterdir()} >= {"floor.png", "decay.png", "tuning.png"}


async def _health(data_dir: Path, chdb_dsn: str) -> tuple[dict[str, object], float, float]:
    """Start gateway, evict and ingest settings over ``data_dir`` as a (re)started process would; return
    /healthz's ``tuned``, the gateway's floor and evict's expiry threshold."""
    settings = AllSettings(
        runtime=RuntimeSettings(data_dir=data_dir),
        kafka=KafkaSettings(
            bootstrap="127.0.0.1:9"
        ),  # never connected: /healthz reports it, tuned is what counts
        clickhouse=ClickHouseSettings(dsn=chdb_dsn, database=f"tuned_{uuid.uuid4().hex[:8]}"),
    )
    async with open_resources(settings, make_broker(settings.kafka)) as resources:
        gateway = GatewaySettings(api_keys={"k": "t"})
        app = build_asgi(resources, gateway)
        job = evict_app.register(resources)
        resources.apply_tuned("ingest", IngestSettings())
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as client:
            body = (await client.get("/healthz")).json()
        return body["tuned"], gateway.similarity_floor, job._cfg.expire_below


async def test_tuned_settings_are_loaded_by_restarted_services_and_reported(
    chdb_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tuning" / "tuned-settings.json"
    tuned, floor, expire = await _health(tmp_path, chdb_dsn)
    assert tuned["gateway"]["version"] is None  # type: ignore[index]
    assert (floor, expire) == (0.65, 0.15)

    settings_file.write(path, {"similarity_floor": 0.72, "expire_below": 0.11, "keep_threshold": 0.25})
    tuned, floor, expire = await _health(tmp_path, chdb_dsn)
    assert (floor, expire) == (0.72, 0.11)
    assert tuned["gateway"]["version"] == 1  # type: ignore[index]
    assert tuned["gateway"]["values"] == {"similarity_floor": 0.72}  # type: ignore[index]
    assert tuned["evict"]["values"] == {"expire_below": 0.11}  # type: ignore[index]
    assert tuned["ingest"]["values"] == {"keep_threshold": 0.25}  # type: ignore[index]

    settings_file.write(path, {"similarity_floor": 0.74})
    monkeypatch.setenv("HINDSIGHT_EVICT_EXPIRE_BELOW", "0.2")  # an explicit setting beats the file
    tuned, floor, expire = await _health(tmp_path, chdb_dsn)
    assert (floor, expire) == (0.74, 0.2)
    assert tuned["evict"]["overridden_by_env"] == ["expire_below"]  # type: ignore[index]

    settings_file.rollback(path)
    tuned, floor, _ = await _health(tmp_path, chdb_dsn)
    assert floor == 0.72
    assert tuned["gateway"]["version"] == 3  # type: ignore[index]

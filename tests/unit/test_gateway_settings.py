"""Gateway settings and API keys: the env formats, the local default, production refusals."""

from __future__ import annotations

import pytest

from hindsight.errors import AuthenticationError, ConfigurationError
from services.gateway.auth import ApiKeys, Principal, key_from_headers, parse_api_keys
from services.gateway.settings import DEV_KEY, GatewaySettings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HINDSIGHT_MODE", "HINDSIGHT_GATEWAY_API_KEYS", "HINDSIGHT_GATEWAY_MAX_TOP_K"):
        monkeypatch.delenv(name, raising=False)


def test_api_keys_env_list_maps_keys_to_tenant_and_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINDSIGHT_GATEWAY_API_KEYS", " k1=acme:agent-7 , k2=globex ")
    assert GatewaySettings().keys() == {
        "k1": Principal(tenant_id="acme", agent_id="agent-7"),
        "k2": Principal(tenant_id="globex"),
    }


def test_api_keys_env_accepts_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "HINDSIGHT_GATEWAY_API_KEYS",
        '{"k1": "acme:agent-7", "k2": {"tenant_id": "globex", "agent_id": null}}',
    )
    assert GatewaySettings().keys() == {
        "k1": Principal(tenant_id="acme", agent_id="agent-7"),
        "k2": Principal(tenant_id="globex"),
    }


def test_malformed_api_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="KEY=TENANT"):
        parse_api_keys("just-a-key")
    with pytest.raises(ValueError, match="tenant_id"):
        parse_api_keys("k1=")


def test_local_mode_defaults_to_the_dev_key() -> None:
    # the single local developer is also the operator who reviews quarantine
    assert GatewaySettings().keys() == {DEV_KEY: Principal(tenant_id="default", role="admin")}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("k1=acme", Principal(tenant_id="acme")),
        ("k1=acme:bot", Principal(tenant_id="acme", agent_id="bot")),
        ("k1=acme@admin", Principal(tenant_id="acme", role="admin")),
        ("k1=acme:ops@admin", Principal(tenant_id="acme", agent_id="ops", role="admin")),
        ('{"k1": {"tenant_id": "acme", "role": "admin"}}', Principal(tenant_id="acme", role="admin")),
    ],
)
def test_api_key_roles(raw: str, expected: Principal) -> None:
    assert GatewaySettings(api_keys=raw).keys() == {"k1": expected}


def test_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="role must be 'agent' or 'admin'"):
        GatewaySettings(api_keys="k1=acme@root")


def test_production_refuses_dev_keys_and_missing_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINDSIGHT_MODE", "production")
    with pytest.raises(ConfigurationError, match="HINDSIGHT_GATEWAY_API_KEYS"):
        GatewaySettings()
    monkeypatch.setenv("HINDSIGHT_GATEWAY_API_KEYS", "real-key=acme,dev-local-key=default")
    with pytest.raises(ConfigurationError, match="real secret"):
        GatewaySettings()
    monkeypatch.setenv("HINDSIGHT_GATEWAY_API_KEYS", "s3cr3t-9f2c=acme")
    assert GatewaySettings().keys() == {"s3cr3t-9f2c": Principal(tenant_id="acme")}


def test_default_top_k_may_not_exceed_max(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINDSIGHT_GATEWAY_MAX_TOP_K", "3")
    with pytest.raises(ValueError, match="default_top_k"):
        GatewaySettings()


def test_keys_are_read_from_bearer_or_x_api_key_headers() -> None:
    keys = ApiKeys({"k1": Principal(tenant_id="acme")})
    assert keys.from_headers({"Authorization": "Bearer k1"}) == Principal(tenant_id="acme")
    assert keys.from_headers({"x-api-key": "k1"}) == Principal(tenant_id="acme")
    assert key_from_headers({"Authorization": "Basic abc"}) is None
    with pytest.raises(AuthenticationError) as missing:
        keys.from_headers({})
    assert missing.value.status_code == 401
    assert missing.value.field == "Authorization"
    with pytest.raises(AuthenticationError):
        keys.principal("k2")


def test_settings_repr_does_not_show_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINDSIGHT_GATEWAY_API_KEYS", "very-secret-key=acme")
    assert "very-secret-key" not in repr(GatewaySettings())

"""Gateway settings and API keys: the env formats, the local default, production refusals."""

from __future__ import annotations

import secrets

import pytest

from hindsight.errors import AuthenticationError, ConfigurationError
from hindsight.settings import (
    MIN_DISTINCT_PAIRS,
    MIN_KEY_BITS_PER_CHAR,
    MIN_KEY_LENGTH,
    distinct_pairs,
    key_strength,
)
from services.gateway.auth import ApiKeys, Principal, key_from_headers, parse_api_keys
from services.gateway.settings import DEV_KEY, GatewaySettings

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "HINDSIGHT_MODE",
        "HINDSIGHT_GATEWAY_API_KEYS",
        "HINDSIGHT_GATEWAY_MAX_TOP_K",
        "HINDSIGHT_GATEWAY_HISTORY_MAX",
    ):
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
    monkeypatch.setenv("HINDSIGHT_GATEWAY_API_KEYS", f"{STRONG}=acme,dev-local-key=default")
    with pytest.raises(ConfigurationError, match="real secret"):
        GatewaySettings()
    monkeypatch.setenv("HINDSIGHT_GATEWAY_API_KEYS", f"{STRONG}=acme")
    assert GatewaySettings().keys() == {STRONG: Principal(tenant_id="acme")}


STRONG = "9f2c1e7a4b0d8c3f6a5e2d1b7c4f0a9e"  # 32 hex characters (`openssl rand -hex 16`)


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("s3cr3t", "too short"),  # the five-character key production accepted before
        ("9f2c1e7a4b0d8c3f6a5e2d1b7c4f0a9", "too short"),  # 31 characters
        ("a" * 64, "too few characters"),
        ("ab" * 32, "too few characters"),
        ("password" * 5, "too few characters"),
        ("Passw0rd!" * 4, "too few characters"),
    ],
)
def test_production_refuses_short_or_regular_api_keys_without_showing_them(
    monkeypatch: pytest.MonkeyPatch, key: str, why: str
) -> None:
    monkeypatch.setenv("HINDSIGHT_MODE", "production")
    monkeypatch.setenv("HINDSIGHT_GATEWAY_API_KEYS", f"{STRONG}=acme,{key}=other")
    with pytest.raises(ConfigurationError, match=why) as refused:
        GatewaySettings()
    assert key not in str(refused.value)
    assert "openssl rand -hex 32" in str(refused.value)


def test_random_keys_of_the_documented_kinds_pass_the_production_check() -> None:
    # 200 keys per kind from the OS's CSPRNG: the rule must never refuse a properly generated key
    for make in (
        lambda: secrets.token_hex(16),
        lambda: secrets.token_hex(32),
        lambda: secrets.token_urlsafe(32),
    ):
        for _ in range(200):
            key = make()
            assert len(key) >= MIN_KEY_LENGTH
            assert key_strength(key) >= MIN_KEY_BITS_PER_CHAR, key
            assert distinct_pairs(key) >= MIN_DISTINCT_PAIRS, key


def test_limits_are_the_settings_the_published_schemas_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINDSIGHT_GATEWAY_MAX_TOP_K", "12")
    monkeypatch.setenv("HINDSIGHT_GATEWAY_HISTORY_MAX", "50")
    assert GatewaySettings().limits() == {"max_top_k": 12, "history_max": 50}


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

"""API keys and the principal they stand for (DESIGN.md section 6: every gateway call is authenticated).

A key maps to a :class:`Principal`: a tenant, optionally one agent of it, and a role (``agent``, the
default, or ``admin``: an operator who may also review the tenant's quarantine). The tenant of every
read and write comes from the key, never from the request body, so a caller only ever sees its own
tenant's memories. Keys are compared in constant time.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hindsight.errors import AuthenticationError

BEARER_PREFIX = "bearer "
API_KEY_HEADER = "x-api-key"


class Principal(BaseModel):
    """Who is calling: the tenant the API key belongs to and, for a per-agent key, the agent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str = Field(min_length=1, description="Tenant every call of this key is confined to.")
    agent_id: str | None = Field(
        None, min_length=1, description="Agent the key is issued to; None for a tenant-wide key."
    )
    role: Literal["agent", "admin"] = Field(
        "agent", description="'admin' may also review the tenant's quarantine (list, release, reject)."
    )

    @property
    def is_admin(self) -> bool:
        """True for an operator key (role ``admin``)."""
        return self.role == "admin"

    def allowed_scopes(self) -> tuple[str, ...] | None:
        """Scopes this principal may read and write: ``("global", "agent:<id>")``, or None (any) for a
        tenant-wide key."""
        if self.agent_id is None:
            return None
        return ("global", f"agent:{self.agent_id}")


def _principal(value: Any, key: str) -> Principal:
    if isinstance(value, Principal):
        return value
    if isinstance(value, Mapping):
        return Principal.model_validate(dict(value))
    if isinstance(value, str):
        owner, _, role = value.strip().partition("@")
        tenant, _, agent = owner.partition(":")
        if role.strip() not in ("", "agent", "admin"):
            raise ValueError(f"API key {key[:4]}...: role must be 'agent' or 'admin', got {role.strip()!r}")
        return Principal(
            tenant_id=tenant.strip(),
            agent_id=agent.strip() or None,
            role="admin" if role.strip() == "admin" else "agent",
        )
    raise ValueError(
        f"API key {key[:4]}...: principal must be 'TENANT[:AGENT]' or an object, got {type(value)}"
    )


def parse_api_keys(raw: Any) -> dict[str, Principal]:
    """Parse API keys: ``"KEY=TENANT[:AGENT][@admin][,KEY2=...]"``, the same as JSON
    (``{"KEY": "TENANT:AGENT"}`` or ``{"KEY": {"tenant_id": ..., "agent_id": ..., "role": "admin"}}``),
    or a mapping. ``@admin`` makes an operator key (quarantine review).

    Raises:
        ValueError: an entry has no ``=``, an empty key or an empty tenant.
    """
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, str):
        text = raw.strip()
        if text.startswith("{"):
            decoded = json.loads(text)
            if not isinstance(decoded, dict):
                raise ValueError("API keys JSON must be an object of key -> principal")
            items = list(decoded.items())
        else:
            items = []
            for entry in filter(None, (part.strip() for part in text.split(","))):
                key, sep, principal = entry.partition("=")
                if not sep:
                    raise ValueError("each API key entry must look like KEY=TENANT[:AGENT]")
                items.append((key, principal))
    else:
        raise ValueError(f"API keys must be a string or a mapping, got {type(raw).__name__}")
    keys: dict[str, Principal] = {}
    for key, value in items:
        name = str(key).strip()
        if not name:
            raise ValueError("an API key is empty; use KEY=TENANT[:AGENT]")
        keys[name] = _principal(value, name)
    return keys


def key_from_headers(headers: Mapping[str, str] | None) -> str | None:
    """The API key sent as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; None when absent."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    authorization = lowered.get("authorization", "")
    if authorization.lower().startswith(BEARER_PREFIX):
        return authorization[len(BEARER_PREFIX) :].strip() or None
    return lowered.get(API_KEY_HEADER, "").strip() or None


class ApiKeys:
    """Resolves API keys to principals (constant-time comparison against every configured key)."""

    def __init__(self, keys: Mapping[str, Principal]) -> None:
        self._keys = [(key.encode(), principal) for key, principal in keys.items()]

    def principal(self, key: str | None) -> Principal:
        """The principal of ``key``.

        Raises:
            AuthenticationError: ``key`` is missing or not configured (HTTP 401).
        """
        if not key:
            raise AuthenticationError("missing API key")
        found: Principal | None = None
        candidate = key.encode()
        for known, principal in self._keys:
            if hmac.compare_digest(known, candidate):
                found = principal
        if found is None:
            raise AuthenticationError("unknown API key")
        return found

    def from_headers(self, headers: Mapping[str, str] | None) -> Principal:
        """The principal of the key in ``headers`` (see :func:`key_from_headers`).

        Raises:
            AuthenticationError: no key, an Authorization header without the Bearer scheme, or an
                unknown key (HTTP 401).
        """
        key = key_from_headers(headers)
        if key is None and headers and any(k.lower() == "authorization" for k in headers):
            raise AuthenticationError(
                "the Authorization header has no 'Bearer ' scheme: send 'Authorization: Bearer <api key>'"
            )
        return self.principal(key)

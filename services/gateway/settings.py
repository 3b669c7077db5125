"""Gateway settings (env prefix ``HINDSIGHT_GATEWAY_``), built inside the app factory, never at import."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from hindsight.errors import ConfigurationError
from hindsight.recall import SIMILARITY_FLOOR, TOP_K_DEFAULT, TOP_K_MAX
from hindsight.settings import RuntimeSettings, require_strong_key
from services.gateway.auth import Principal, parse_api_keys

DEV_KEY = "dev-local-key"
"""The key every local (embedded) install accepts out of the box; refused in production."""


class GatewaySettings(BaseSettings):
    """Knobs of the gateway (DESIGN.md sections 4 and 6).

    ``api_keys`` is given in the environment as ``KEY=TENANT[:AGENT][,KEY2=TENANT2[:AGENT2]]`` or as
    JSON. Unset, local mode accepts ``dev-local-key`` for tenant ``default``; production mode
    (``HINDSIGHT_MODE=production``) needs explicit keys, refuses every key starting ``dev-`` and every
    key shorter than 32 characters or with less than 3 bits of entropy per character
    (:func:`hindsight.settings.require_strong_key`; ``openssl rand -hex 32`` makes a good key).

    Raises:
        ConfigurationError: production mode with no keys, or with a ``dev-`` / placeholder / weak key.
        pydantic.ValidationError: a malformed value (bad key list, ``default_top_k`` > ``max_top_k``).
    """

    model_config = SettingsConfigDict(env_prefix="HINDSIGHT_GATEWAY_", extra="ignore")

    host: str = Field("127.0.0.1", description="Interface the HTTP server binds to.")
    port: int = Field(8080, ge=0, le=65535, description="TCP port of the HTTP server (0 = any free port).")
    api_keys: Annotated[dict[str, Principal] | None, NoDecode] = Field(
        None,
        repr=False,
        description="API key -> principal; env 'KEY=TENANT[:AGENT][@admin][,...]' or JSON. "
        "Unset: the local dev key (admin).",
    )
    default_top_k: int = Field(
        TOP_K_DEFAULT, ge=1, description="Memories recall returns when top_k is omitted."
    )
    max_top_k: int = Field(TOP_K_MAX, ge=1, description="Largest top_k a caller may ask for (DESIGN.md s4).")
    candidates: int = Field(50, ge=1, description="Vector-search candidates ranked per recall.")
    similarity_floor: float = Field(
        SIMILARITY_FLOOR, ge=-1.0, le=1.0, description="Cosine below which a memory is never recalled."
    )
    time_mode: Literal["step", "exp"] = Field(
        "step", description="Recall time weighting: step or exponential."
    )
    history_max: int = Field(1000, ge=1, description="Largest page a history call may ask for.")
    token_budget: int = Field(
        2000, ge=1, description="Default most tokens of memory text per recall response."
    )
    max_body_bytes: int = Field(
        2 * 1024 * 1024,
        ge=1024,
        description="Largest request body (Content-Length) read; a larger one is refused with 413 before it "
        "is read (a retain's content is at most 100,000 characters, ~400 KB of UTF-8).",
    )
    keep_alive_s: int = Field(
        75,
        ge=1,
        description="Seconds an idle HTTP keep-alive connection stays open (uvicorn's default is 5: an "
        "agent calling every few seconds would reconnect, or race the server's close).",
    )
    mcp_json_response: bool = Field(
        True,
        description="Answer each MCP request with one JSON body instead of an SSE stream: the tools "
        "send no progress or server-initiated requests, and it costs less CPU per call.",
    )
    access_log_buffer: int = Field(
        10_000,
        ge=1,
        description="Recall logs (one per recall; the access log's source) waiting to be sent in the "
        "background; beyond it they are dropped (counted), never slowing a recall.",
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_keys(cls, value: Any) -> Any:
        return value if value is None else parse_api_keys(value)

    @model_validator(mode="after")
    def _check(self) -> GatewaySettings:
        if self.default_top_k > self.max_top_k:
            raise ValueError(
                f"default_top_k ({self.default_top_k}) must not exceed max_top_k ({self.max_top_k})"
            )
        mode = RuntimeSettings().mode
        if self.api_keys is None:
            if mode == "production":
                raise ConfigurationError(
                    "HINDSIGHT_GATEWAY_API_KEYS must be set in production mode (KEY=TENANT[:AGENT],...)"
                )
            # the developer on a laptop is also the operator: the dev key opens the console
            self.api_keys = {DEV_KEY: Principal(tenant_id="default", role="admin")}
        if not self.api_keys:
            raise ConfigurationError(
                "HINDSIGHT_GATEWAY_API_KEYS holds no key: the gateway would refuse every call"
            )
        for key in self.api_keys:
            require_strong_key(mode, "HINDSIGHT_GATEWAY_API_KEYS", key)
        return self

    def limits(self) -> dict[str, int]:
        """The settings-dependent bounds the request models mark (``MAX_FROM_SETTING``): setting name
        -> value, filled into the OpenAPI document and the MCP tool schemas."""
        return {"max_top_k": self.max_top_k, "history_max": self.history_max}

    def keys(self) -> dict[str, Principal]:
        """The configured API keys (never empty after validation)."""
        return dict(self.api_keys or {})

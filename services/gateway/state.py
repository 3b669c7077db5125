"""What both transports share: the service core, the key resolver and the process's resources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hindsight.runtime import Resources
    from services.gateway.auth import ApiKeys, Principal
    from services.gateway.service import MemoryService
    from services.gateway.settings import GatewaySettings


@dataclass(frozen=True)
class GatewayState:
    """Per-process gateway state; the MCP server's typed lifespan context and ``app.state.gateway``.

    ``stdio_principal`` is the principal of ``HINDSIGHT_API_KEY`` when serving MCP over stdio
    (no request headers there); ``None`` over HTTP, where every request carries its own key.
    """

    service: MemoryService
    keys: ApiKeys
    resources: Resources
    settings: GatewaySettings
    stdio_principal: Principal | None = None

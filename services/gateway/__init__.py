"""Gateway: MCP tools and an HTTP API over one memory service core (DESIGN.md sections 5, 6 and 9).

- :mod:`services.gateway.service`: :class:`MemoryService`, the core both transports call;
- :mod:`services.gateway.http`: the FastAPI routes (``/v1/...``, ``/healthz``, ``/metrics``);
- :mod:`services.gateway.mcp_server`: the MCP server (tools ``retain``, ``recall``, ``reflect``,
  ``forget``, ``history``), over streamable HTTP at ``/mcp`` or over stdio;
- :mod:`services.gateway.app`: ``uvicorn services.gateway.app:create_app --factory`` and ``run_stdio``.

The gateway never writes memories to a store: ``retain`` publishes to Kafka like any agent, so every
memory passes the guard. Every call is authenticated by an API key that fixes the caller's tenant.
"""

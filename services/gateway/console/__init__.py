"""The operator console served by the gateway at ``/console`` (DESIGN.md section 10)."""

from __future__ import annotations

from fastapi import FastAPI

from services.gateway.console.routes import exception_handlers, router


def install(app: FastAPI) -> None:
    """Add the console's routes and its login redirect to ``app``."""
    app.include_router(router)
    for exc_class, handler in exception_handlers().items():
        app.add_exception_handler(exc_class, handler)


__all__ = ["install"]

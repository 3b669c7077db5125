"""Quarantine review for operators (admin keys): list, release, reject (issue 10 item 3).

Release publishes the held-back item on through the pipeline, marked ``reviewed`` so no later check
holds it back again: a guard quarantine goes to ``memory.guarded.v1`` as the redacted interaction
with its original trust; a consistency quarantine (held back at the embed stage) goes to
``memory.candidates.v1`` as its candidate. Memory ids derive from event ids, so a release that is
repeated (or raced) stores the memory once; a second release of a released item publishes nothing
and answers the same. Blocked items (a secret was found) kept no content and cannot be released.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from hindsight.stores.quarantine import QuarantineItem
from schemas import GuardedEvent, Topic, partition_key
from services.gateway.errors import ConflictError, ForbiddenError, ItemNotFoundError
from services.gateway.models import QuarantineList, QuarantineView

if TYPE_CHECKING:
    from hindsight.runtime import Resources
    from services.gateway.auth import Principal


def _view(item: QuarantineItem) -> QuarantineView:
    r = item.record
    return QuarantineView(
        id=item.id,
        user_id=r.user_id,
        agent_id=r.agent_id,
        session_id=r.session_id,
        event_id=r.event_id,
        stage=r.stage,
        verdict=r.verdict,
        reasons=list(r.reasons),
        source=r.source,
        trust=r.trust,
        tool_name=r.tool_name,
        external_ref=r.external_ref,
        scores=dict(r.scores),
        content=r.content_redacted,
        findings=dict(r.findings),
        quarantined_at=r.quarantined_at,
        status=item.status,
        reviewed_by=item.reviewed_by,
        reviewed_at=item.reviewed_at,
    )


def _reviewer(principal: Principal) -> str:
    return principal.tenant_id + (f":{principal.agent_id}" if principal.agent_id else "")


class ReviewService:
    """Quarantine review over the process's resources (quarantine store, Kafka publisher)."""

    def __init__(self, resources: Resources) -> None:
        self._resources = resources

    @staticmethod
    def _require_admin(principal: Principal) -> None:
        if not principal.is_admin:
            raise ForbiddenError(
                "quarantine review needs an admin API key",
                field="Authorization",
                fix="use a key configured as KEY=TENANT@admin in HINDSIGHT_GATEWAY_API_KEYS",
            )

    async def _item(self, principal: Principal, item_id: str) -> QuarantineItem:
        store = await asyncio.to_thread(self._resources.quarantine)
        item = await asyncio.to_thread(store.get, principal.tenant_id, item_id)
        if item is None:
            raise ItemNotFoundError(item_id)
        return item

    async def list(
        self,
        principal: Principal,
        *,
        user_id: str | None = None,
        status: Literal["pending", "released", "rejected"] | None = "pending",
        limit: int = 100,
    ) -> QuarantineList:
        """The tenant's quarantined items, newest first.

        Raises:
            ForbiddenError: the key is not an admin key.
            StoreUnavailableError: ClickHouse failed.
        """
        self._require_admin(principal)
        store = await asyncio.to_thread(self._resources.quarantine)
        items = await asyncio.to_thread(
            store.find, principal.tenant_id, user_id=user_id, status=status, limit=limit
        )
        return QuarantineList(items=[_view(i) for i in items])

    async def release(self, principal: Principal, *, item_id: str) -> QuarantineView:
        """Publish the item on through the pipeline (idempotent) and mark it released.

        Raises:
            ForbiddenError: not an admin key.
            ItemNotFoundError: no such item in the caller's tenant.
            ConflictError: the item is blocked (no content kept) or already rejected.
            StoreUnavailableError: Kafka or ClickHouse failed (retrying is safe).
        """
        self._require_admin(principal)
        item = await self._item(principal, item_id)
        if item.status == "released":
            return _view(item)
        record = item.record
        if item.status == "rejected":
            raise ConflictError(
                f"item {item_id} was rejected", field="item_id", fix="a rejected item cannot be released"
            )
        if record.verdict == "block" or (record.interaction is None and record.candidate is None):
            raise ConflictError(
                f"item {item_id} was blocked for a secret; its content was never kept",
                field="item_id",
                fix="ask the sender to resend it without the secret, then reject this item",
            )
        publisher = self._resources.publisher()
        key = partition_key(record.tenant_id, record.user_id)
        if record.interaction is not None:
            guarded = GuardedEvent(
                interaction=record.interaction,
                trust=record.trust if record.trust is not None else 0.0,
                findings=dict(record.findings),
                guarded_at=datetime.now(UTC),
                reviewed=True,
            )
            publisher.send(Topic.GUARDED, key, guarded)
        elif record.candidate is not None:
            publisher.send(Topic.CANDIDATES, key, record.candidate.model_copy(update={"reviewed": True}))
        await publisher.flush()
        store = self._resources.quarantine()
        done = await asyncio.to_thread(
            store.review, item, "released", _reviewer(principal), datetime.now(UTC)
        )
        return _view(done)

    async def reject(self, principal: Principal, *, item_id: str) -> QuarantineView:
        """Mark the item rejected (it stays for the audit trail, never stored as memory).

        Raises:
            ForbiddenError: not an admin key.
            ItemNotFoundError: no such item in the caller's tenant.
            ConflictError: the item was already released.
            StoreUnavailableError: ClickHouse failed.
        """
        self._require_admin(principal)
        item = await self._item(principal, item_id)
        if item.status == "rejected":
            return _view(item)
        if item.status == "released":
            raise ConflictError(
                f"item {item_id} was already released",
                field="item_id",
                fix="forget the stored memory instead (DELETE /v1/memories/{id})",
            )
        store = self._resources.quarantine()
        done = await asyncio.to_thread(
            store.review, item, "rejected", _reviewer(principal), datetime.now(UTC)
        )
        return _view(done)

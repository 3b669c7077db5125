"""A sample of the guard set through the gateway end to end (``hindsight bench guard``, issue 10 item 4).

Starts the embedded default (its own broker, Redis, chDB and vector store in a scratch directory),
retains each sampled line over HTTP (``POST /v1/memories``, one user per line, the line's source),
waits until every consumer group has caught up, then reads the stores back:

- ``stored``: the user has a memory in the vector store;
- ``quarantined``: the quarantine store (ClickHouse) holds an item for the user;
- ``dropped``: neither (the write trigger kept nothing, e.g. an empty-ish turn).

and prints one JSON line: per-outcome counts, attack quarantine rate, benign lines quarantined,
agreement with the in-process guard's verdict on the same lines, and the labelled secret values
found anywhere in Qdrant payloads, ClickHouse tables or Redis (must be 0). The sample is
stratified: every kind of both held-out splits (``heldout``, ``fresh``) in turn.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.common import scratch_dir
from bench.stack import embedded
from services.guard.dataset import Example

SECRET_TYPES = frozenset({"api_key", "token", "private_key", "password"})
API_KEY = "bench-guard-e2e-key"
TENANT = "bench-guard"


def sample(examples: Sequence[Example], size: int) -> list[Example]:
    """Up to ``size`` examples, taking one of each kind in turn (deterministic: file order)."""
    by_kind: dict[str, list[Example]] = {}
    for ex in examples:
        by_kind.setdefault(ex.kind, []).append(ex)
    out: list[Example] = []
    while len(out) < size and any(by_kind.values()):
        for kind in sorted(by_kind):
            if by_kind[kind] and len(out) < size:
                out.append(by_kind[kind].pop(0))
    return out


async def _store_dump(stack: Any) -> str:
    from hindsight.stores.vector import MemoryFilter  # noqa: PLC0415

    records, _ = stack.resources.vector_store().scroll(MemoryFilter(tenant_id=TENANT, statuses=None), 100_000)
    parts = [repr([r.payload for r in records])]
    client = stack.resources.clickhouse()
    cfg = stack.resources.settings.clickhouse
    stack.resources.quarantine()
    for table in (cfg.table, cfg.quarantine_table):
        parts.append(repr(client.query(f"SELECT * FROM `{table}`").result_rows))
    redis = await stack.resources.redis()
    async for key in redis.scan_iter(count=500):
        parts.append(repr(key))
        if (await redis.type(key)).decode() == "string":
            parts.append(repr(await redis.get(key)))
    return "\n".join(parts)


async def run(
    examples: Sequence[Example],
    in_process: Callable[[Example, int], bool],
    *,
    timeout_s: float = 900.0,
    keep: Path | None = None,
) -> dict[str, Any]:
    """Retain ``examples`` through the gateway and read back the outcome of each (see the module
    docstring). ``in_process(example, i)`` is the in-process guard's verdict (True = quarantined),
    for the agreement figure.

    Raises:
        TimeoutError: the pipeline did not catch up within ``timeout_s``.
        ConfigurationError: the embedded stack could not start.
    """
    from hindsight.records import from_payload  # noqa: PLC0415
    from hindsight.stores.vector import MemoryFilter  # noqa: PLC0415

    started = time.perf_counter()
    run_id = uuid.uuid4().hex[:6]
    with scratch_dir("hindsight-bench-guard-", keep) as data_dir:
        async with (
            embedded(data_dir, {API_KEY: TENANT}) as stack,
            httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as http,
        ):
            ready_s = time.perf_counter() - started
            users = []
            for i, ex in enumerate(examples):
                user = f"{run_id}-{i}"
                users.append(user)
                body = {"user_id": user, "session_id": "s", "content": ex.text, "source": ex.source}
                response = await http.post(
                    "/v1/memories", json=body, headers={"Authorization": f"Bearer {API_KEY}"}
                )
                response.raise_for_status()
            await stack.wait_caught_up(timeout_s=timeout_s)
            store = stack.resources.vector_store()
            quarantine = stack.resources.quarantine()
            outcomes: list[str] = []
            for user in users:
                records, _ = await asyncio.to_thread(
                    store.scroll, MemoryFilter(tenant_id=TENANT, user_id=user, statuses=None), 100
                )
                held = await asyncio.to_thread(quarantine.find, TENANT, user_id=user)
                stored = [from_payload(r.payload) for r in records if r.payload.get("status") == "active"]
                outcomes.append("quarantined" if held else "stored" if stored else "dropped")
            dump = await _store_dump(stack)
    secrets = [ex.text[s.start : s.end] for ex in examples for s in ex.spans if s.type in SECRET_TYPES]
    attacks = [o for ex, o in zip(examples, outcomes, strict=True) if ex.attack]
    benign = [
        o for ex, o in zip(examples, outcomes, strict=True) if ex.kind in ("benign", "lookalike", "pii")
    ]
    agree = sum(
        (o == "quarantined") == in_process(ex, i)
        for i, (ex, o) in enumerate(zip(examples, outcomes, strict=True))
    )
    return {
        "bench": "guard",
        "system": "gateway_e2e",
        "split": "held-out sample",
        "lines": len(examples),
        "outcomes": dict(sorted(Counter(outcomes).items())),
        "attack_quarantine": round(attacks.count("quarantined") / len(attacks), 4) if attacks else None,
        "attacks": len(attacks),
        "benign_quarantined": benign.count("quarantined"),
        "benign_lines": len(benign),
        "agreement_with_in_process": round(agree / len(examples), 4) if examples else None,
        "secrets_seeded": len(secrets),
        "secrets_found_in_stores": sum(1 for s in secrets if s in dump),
        "stack_ready_s": round(ready_s, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }

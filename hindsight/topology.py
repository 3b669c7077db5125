"""The pipeline's consumer groups and the topics each consumes (DESIGN.md section 3).

The one list of "which stage reads what". Each service's ``register`` subscribes its stages to these
topics; :meth:`hindsight.runtime.Resources.subscribe` records what a process actually subscribed (the
embedded runner waits for exactly those groups to catch up, and the console reports their lag); a
lone gateway, which runs no stage, reports the lag of the groups listed here. A test checks that the
embedded stack subscribes exactly this map, so a new stage is added here or the suite fails.
"""

from __future__ import annotations

from schemas import Topic

STAGE_TOPICS: dict[str, tuple[str, ...]] = {
    "guard": (Topic.INTERACTIONS,),
    "quarantine": (Topic.QUARANTINE,),
    "ingest-trigger": (Topic.GUARDED,),
    "ingest-embed": (Topic.CANDIDATES,),
    "ingest-reconcile": (Topic.STORED,),
    "reflect": (Topic.SESSIONS,),
    "accesslog": (Topic.RECALLS, Topic.ACCESS),
    "analytics": (Topic.RECALLS, Topic.FEEDBACK, Topic.STORED, Topic.EPISODES),
}
"""Consumer group suffix (``<prefix>-<suffix>``) -> the topics that group consumes."""

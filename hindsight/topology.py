"""The pipeline's consumer groups and the topics each consumes (DESIGN.md section 3).

One place for "which stage reads what": the embedded runner waits for these groups to catch up and
the operator console reports their lag. A composition root that runs other stages passes its own map.
"""

from __future__ import annotations

from schemas import Topic

STAGE_TOPICS: dict[str, tuple[str, ...]] = {
    "guard": (Topic.INTERACTIONS,),
    "quarantine": (Topic.QUARANTINE,),
    "ingest-trigger": (Topic.GUARDED,),
    "ingest-embed": (Topic.CANDIDATES,),
    "reflect": (Topic.SESSIONS,),
    "accesslog": (Topic.ACCESS,),
    "analytics": (Topic.RECALLS, Topic.FEEDBACK, Topic.STORED, Topic.EPISODES),
}
"""Consumer group suffix (``<prefix>-<suffix>``) -> the topics that group consumes."""

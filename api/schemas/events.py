"""What one server-sent event of `/v1/events` carries, per event type: `id` (the event's
sequence number), `event` (its type) and `data`, a JSON object `{"seq", "type", "data",
"at"}` whose `data` has the type's members (docs/api.md, "Events"). An event of a type
not listed here breaks the documented schema: the fuzz test reads the stream."""

from __future__ import annotations

from typing import Any

# Per type: the members its payload always has (more may follow).
EVENT_MEMBERS: dict[str, tuple[str, ...]] = {
    "message.received": ("message_id",),
    "message.routed": ("message_id",),
    "message.delivered": ("message_id",),
    "message.read": ("message_id",),
    "message.withdrawn": ("message_id",),
    "message.moved": ("message_id", "to_message_id"),
    "task.created": ("task_id", "kind"),
    "task.status": ("task_id", "status"),
    "task.reply": ("text",),
    "task.promoted": ("task_id",),
    "task.checklist": ("task_id", "checklist"),
    "reply.delta": ("task_id", "turn", "step", "attempt", "offset", "text"),
    "card.created": ("card_id", "kind", "status"),
    "card.answered": ("card_id",),
    "generation.progress": ("status", "progress"),
    "generation.completed": ("status", "progress"),
    "object.version": ("object_id", "version"),
    "object.deleted": ("object_id",),
    "memory.changed": (),
    "budget.changed": (),
    "flow.run": ("run_id", "status"),
    "flow.node": ("run_id", "node_id", "status"),
    "nudge": ("task_ids", "text"),
}


def _one(kind: str, members: tuple[str, ...]) -> dict[str, Any]:
    payload = {"type": "object", "required": list(members)}
    envelope = {
        "type": "object",
        "required": ["seq", "type", "data", "at"],
        "properties": {
            "seq": {"type": "integer", "minimum": 1},
            "type": {"const": kind},
            "data": payload,
            "at": {"type": "string"},
        },
    }
    return {
        "title": kind,
        "properties": {
            "event": {"const": kind},
            "data": {"contentMediaType": "application/json", "contentSchema": envelope},
        },
    }


def event_schema() -> dict[str, Any]:
    """One server-sent event, by its type."""
    return {
        "type": "object",
        "required": ["id", "event", "data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "event": {"type": "string", "enum": sorted(EVENT_MEMBERS)},
            "data": {"type": "string"},
        },
        "oneOf": [_one(kind, members) for kind, members in sorted(EVENT_MEMBERS.items())],
    }

"""The router's request: stable rules (cached) + a bounded block of compact candidate lines
+ the person's raw message. Tokens per decision depend on the candidate count, never on
how many tasks the index holds."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from llm.types import Message, ModelRequest, SystemBlock, TextBlock, ToolSpec
from routing.index import Candidate
from routing.text import language_name
from routing.types import DECISIONS

# Blocks the router reads besides the person's message start with this marker, so the
# person's own words (language, content) are never confused with ours.
MARK = "[router]"
FIELD_CHARS = 140
DUPLICATE_CHECK = "Duplicate check."
CANDIDATES = "Candidate tasks, most recently active first:"
CONVERSATION = (
    "Recent conversation, oldest first (the person's messages, where they went, the "
    "replies), then the latest work made:"
)
LANGUAGE = "The person writes in"

ROUTER_RULES = (
    "You are the main thread's router. Decide where the person's message goes and call "
    "the tool `route` exactly once. Decisions: answer (you answer yourself: greetings, "
    "simple questions, capability questions from the catalogue below); lightweight (one "
    "generation, no follow-up planned); existing (a follow-up to one of the candidate tasks: "
    "set task_id); new (a goal that needs planning and several steps: a persistent task; "
    "write a short briefing); clarify (the evidence cannot tell between candidates: list "
    "their ids in candidate_ids). Never guess between two plausible tasks: clarify. "
    "Set promote=true when the person keeps revising a lightweight task. When the person "
    "says their previous message was meant for another task, call `move_message` with that "
    "task's id instead. "
    'Read the recent conversation: a message that names no work ("and one more in blue") '
    'continues the work it follows; a question about the conversation ("what did you just '
    'make?") is answered from it, naming the work, never an id. Write `answer` in the '
    "person's language. "
    "Generation model catalogue:\n"
)

ROUTE_TOOL = ToolSpec(
    name="route",
    description="Record where the person's message goes.",
    input_schema={
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": list(DECISIONS)},
            "task_id": {"type": "string"},
            "candidate_ids": {"type": "array", "items": {"type": "string"}},
            "answer": {"type": "string"},
            "briefing": {"type": "string"},
            "promote": {"type": "boolean"},
            "reason": {"type": "string"},
        },
        "required": ["decision"],
    },
)


# The person says their previous message was meant for another task ("that was for the
# posters"): the main thread moves it there instead of routing these words.
MOVE_TOOL = ToolSpec(
    name="move_message",
    description=(
        "The person says their previous message was meant for another task: move that "
        "message to the task (task_id of a candidate). Call this instead of `route`."
    ),
    input_schema={
        "type": "object",
        "properties": {"task_id": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["task_id"],
    },
)


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def age(now: datetime, then: datetime) -> str:
    secs = max(0, int((now - then).total_seconds()))
    if secs < 3600:
        return f"{secs // 60}m"
    if secs < 86400:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def candidate_line(c: Candidate, now: datetime) -> str:
    objs = ", ".join(
        f"{r['id']} {r.get('type', '')} {clip(str(r.get('name', '')), 40)}" for r in c.object_refs
    )
    match = []
    if c.keyword_hits:
        match.append(f"words {c.keyword_hits}")
    if c.similarity is not None:
        match.append(f"sim {c.similarity:.2f}")
    return (
        f"- {c.task_id} | {c.kind} {c.status} | active {age(now, c.last_active_at)} ago"
        f" | goal: {clip(c.goal)} | summary: {clip(c.summary) or '-'}"
        f" | objects: {objs or '-'} | match: {', '.join(match) or '-'}"
    )


def _system(capabilities: str) -> list[SystemBlock]:
    # The generation catalogue is passed in (the caller knows it), so routing does not
    # depend on money; it is part of the cached prefix.
    return [SystemBlock(text=ROUTER_RULES + capabilities, cache=True)]


def route_request(
    text: str,
    candidates: Sequence[Candidate],
    now: datetime,
    capabilities: str,
    conversation: Sequence[str] = (),
    language: str = "en",
) -> ModelRequest:
    """The router's request. `conversation`: the recent turns and work
    (routing/conversation.py), so follow-ups and questions about them are understood;
    `language`: the person's, which main's own answer is written in."""
    lines = [candidate_line(c, now) for c in candidates] or ["- (no tasks yet)"]
    blocks = []
    if conversation:
        blocks.append(TextBlock(text=f"{MARK} {CONVERSATION}\n" + "\n".join(conversation)))
    blocks.append(TextBlock(text=f"{MARK} {CANDIDATES}\n" + "\n".join(lines)))
    blocks.append(TextBlock(text=f"{MARK} {LANGUAGE} {language_name(language)} ({language})."))
    return ModelRequest(
        system=_system(capabilities),
        messages=[Message(role="user", content=[*blocks, TextBlock(text=text)])],
        tools=[ROUTE_TOOL, MOVE_TOOL],
        max_tokens=400,
        purpose="route",
    )


def duplicate_request(
    text: str,
    rows: Sequence[tuple[Candidate, float, list[str], list[str]]],
    now: datetime,
    capabilities: str,
) -> ModelRequest:
    """Second opinion before creating a persistent task: likely duplicates with the words
    that differ (embeddings alone cannot tell "warmer" from "cooler")."""
    lines = [
        candidate_line(c, now)
        + f" | similarity {sim:.2f} | only in message: {', '.join(mine) or '-'}"
        + f" | only in task: {', '.join(theirs) or '-'}"
        for c, sim, mine, theirs in rows
    ]
    head = (
        f"{MARK} {DUPLICATE_CHECK} The message looks like a new goal, but these running tasks "
        "are similar. Decide: existing (continue that task: task_id), new (the goal differs), "
        "clarify (cannot tell: candidate_ids).\n"
    )
    return ModelRequest(
        system=_system(capabilities),
        messages=[
            Message(
                role="user", content=[TextBlock(text=head + "\n".join(lines)), TextBlock(text=text)]
            )
        ],
        tools=[ROUTE_TOOL],
        max_tokens=300,
        purpose="route",
    )


def route_call(tool_uses: Sequence[Any]) -> dict[str, Any] | None:
    """The router's decision; a `move_message` call is the decision "move"."""
    for u in tool_uses:
        if u.name == MOVE_TOOL.name and isinstance(u.input, dict):
            return {**u.input, "decision": "move"}
    for u in tool_uses:
        if u.name == "route" and isinstance(u.input, dict):
            return dict(u.input)
    return None

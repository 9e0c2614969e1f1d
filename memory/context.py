"""What the context builder gets from memory, and what it must leave out.

Retrieval is bounded by `memory_timeout_seconds` and never raises: a slow DB or a vector
index that is down degrades to "no memory this step" with the reason recorded, so a task
never fails because of memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.engine import Database
from lomo.db.models import MessageRow
from lomo.db.query import Query, Rows, run
from lomo.settings import Settings
from lomo.telemetry import DEGRADATIONS, MEMORY_RETRIEVAL
from memory.models import (
    Evidence,
    Memory,
    MemoryLink,
    MemoryUsage,
    MemoryVersion,
    ProfileSnapshot,
)
from memory.recall import Recalled, recall
from memory.services import get_services

log = logging.getLogger(__name__)


class MemoryDeps(Protocol):
    """What retrieval needs of its caller (the activities' MemoryDeps has both)."""

    db: Database
    settings: Settings


@dataclass
class MemoryContext:
    profile_version: int = 0
    profile_text: str = ""  # the stable prefix: changes only with the profile version
    items: list[str] = field(default_factory=list)  # retrieved memories with provenance
    degraded: str | None = None  # why memory is missing or partial this step
    version_ids: list[str] = field(default_factory=list)  # pass to usage_writes
    sources: list[list[str]] = field(default_factory=list)  # per item: the messages behind it


@dataclass
class Exclusions:
    message_ids: set[str] = field(default_factory=set)
    step_keys: set[tuple[str, int, int]] = field(default_factory=set)


def profile_text(version: int, items: list[dict[str, object]]) -> str:
    if not items:
        return ""
    lines = [f"- {i['content']} [{i['memory_id']} v{i['version']}]" for i in items]
    return f"Profile of the person (v{version}):\n" + "\n".join(lines)


def profile_queries(user_id: str, task_id: str) -> list[Query]:
    """The profile snapshot and whether a memory of this task waits to be bound to it (rows
    for `profile_of`), for a model step to read with its own reads."""
    return [
        Query(_LATEST_PROFILE, {"user_id": user_id}),
        Query(_UNBOUND, {"user_id": user_id, "task_id": task_id}),
    ]


def profile_of(profile: Rows, unbound: Rows) -> tuple[MemoryContext, bool]:
    """The rows of `profile_queries` as the profile's context and the unbound flag."""
    if not profile:
        return MemoryContext(), bool(unbound)
    version, items = profile[0]
    return MemoryContext(
        profile_version=version,
        profile_text=profile_text(version, items),
        version_ids=[str(i["version_id"]) for i in items],
    ), bool(unbound)


async def _profile(deps: MemoryDeps, user_id: str, task_id: str) -> tuple[MemoryContext, bool]:
    async with deps.db.session() as s:
        rows = [await run(s, q) for q in profile_queries(user_id, task_id)]
    return profile_of(*rows)


async def _items(
    deps: MemoryDeps, user_id: str, task_id: str, query: str, skip: set[str], adopt: bool
) -> list[Recalled]:
    if adopt:
        await _adopt_task_memories(deps, user_id, task_id)
    services = get_services(deps.settings)
    return await recall(
        deps.db, services, user_id, task_id, query, deps.settings.memory_top_k, skip
    )


async def _adopt_task_memories(deps: MemoryDeps, user_id: str, task_id: str) -> None:
    """A one-off instruction extracted before routing knew its task ("this time a saturated
    red" in the main thread) belongs to the task its message was routed to: bind it now."""
    async with deps.db.session() as s:
        rows = (
            await s.execute(
                select(Memory, Evidence)
                .join(MemoryVersion, MemoryVersion.memory_id == Memory.id)
                .join(MemoryLink, MemoryLink.target_id == MemoryVersion.id)
                .join(Evidence, Evidence.id == MemoryLink.source_id)
                .join(MessageRow, MessageRow.id == Evidence.message_id)
                .where(
                    Memory.user_id == user_id,
                    Memory.scope == "task",
                    Memory.task_id.is_(None),
                    MessageRow.task_id == task_id,
                )
            )
        ).all()
        memory_ids = set()
        for memory, ev in rows:
            memory.task_id = task_id
            ev.task_id = task_id
            memory_ids.add(memory.id)
        version_ids = (
            list(
                await s.scalars(
                    select(MemoryVersion.id).where(MemoryVersion.memory_id.in_(memory_ids))
                )
            )
            if memory_ids
            else []
        )
    if version_ids:
        await get_services(deps.settings).sync_versions(deps.db, version_ids)


async def memory_for_context(
    deps: MemoryDeps,
    user_id: str,
    task_id: str,
    query: str,
    profile: tuple[MemoryContext, bool] | None = None,
) -> MemoryContext:
    """The profile and the memories found for `query`. `profile` is what `read_profile`
    gave a caller that read it with its own reads (a model step, one round trip): only the
    search is left then, bounded and degrading the same way."""
    start = time.monotonic()
    if profile is None:
        ctx = await _retrieve(deps, user_id, task_id, query)
    else:
        left = deps.settings.memory_timeout_seconds
        ctx = await _search(deps, user_id, task_id, query, *profile, left)
    MEMORY_RETRIEVAL.observe(time.monotonic() - start)
    if ctx.degraded:
        DEGRADATIONS.labels("memory").inc()
    return ctx


async def _retrieve(deps: MemoryDeps, user_id: str, task_id: str, query: str) -> MemoryContext:
    timeout = deps.settings.memory_timeout_seconds
    start = time.monotonic()
    try:
        ctx, unbound = await asyncio.wait_for(_profile(deps, user_id, task_id), timeout)
    except TimeoutError:
        return MemoryContext(degraded=f"memory timed out after {timeout:g} s")
    except Exception as e:
        log.warning("memory profile unavailable for %s: %r", user_id, e)
        return MemoryContext(degraded=f"memory unavailable ({type(e).__name__})")
    left = max(0.0, timeout - (time.monotonic() - start))
    return await _search(deps, user_id, task_id, query, ctx, unbound, left)


async def _search(
    deps: MemoryDeps,
    user_id: str,
    task_id: str,
    query: str,
    ctx: MemoryContext,
    unbound: bool,
    left: float,
) -> MemoryContext:
    """The memories found for `query` added to the profile's context, within `left` seconds;
    a slow or failing search leaves the profile only, with the reason."""
    timeout = deps.settings.memory_timeout_seconds
    try:
        found = await asyncio.wait_for(
            _items(deps, user_id, task_id, query, set(ctx.version_ids), unbound), left
        )
    except TimeoutError:
        ctx.degraded = f"memory search timed out after {timeout:g} s; profile only"
        return ctx
    except Exception as e:
        log.warning("memory search unavailable for %s: %r", user_id, e)
        ctx.degraded = f"memory search unavailable ({type(e).__name__}); profile only"
        return ctx
    ctx.items = [r.line for r in found]
    ctx.sources = [r.message_ids for r in found]
    ctx.version_ids = [*ctx.version_ids, *(r.version_id for r in found if r.version_id)]
    return ctx


# One row per memory version a step's context contained, written with the stored step in
# its transaction. A row already there is kept.
RECORD_USAGE = (
    pg_insert(MemoryUsage)
    .inline()  # no RETURNING of the new ids: nothing reads them
    .values(
        task_id=bindparam("p_task"),
        turn=bindparam("p_turn"),
        step=bindparam("p_step"),
        version_id=bindparam("p_version"),
        created_at=bindparam("p_at"),
    )
    .on_conflict_do_nothing()
)


def usage_queries(
    task_id: str, turn: int, step: int, version_ids: list[str], at: datetime
) -> list[Query]:
    """The writes that remember which memory versions one step's context contained
    (idempotent: a version recorded before for the step is left as it is)."""
    key = {"p_task": task_id, "p_turn": turn, "p_step": step, "p_at": at}
    return [Query(RECORD_USAGE, {**key, "p_version": v}) for v in dict.fromkeys(version_ids)]


def exclusion_queries(user_id: str) -> list[Query]:
    """Forgotten raw messages (with the steps that read them) and the steps whose context
    held a deleted memory version: rows for `exclusions_of`."""
    return [Query(_FORGOTTEN, {"user_id": user_id}), Query(_STEPS_OF_DELETED, {"user_id": user_id})]


def exclusions_of(forgotten: Rows, of_deleted: Rows) -> Exclusions:
    """What a context must leave out: forgotten raw messages, and the steps whose outputs
    were derived from forgotten content (a context that held a deleted version, or a step
    that read a forgotten message)."""
    steps = {(t, turn, step) for t, turn, step in of_deleted}
    read = [(t, turn, step) for _m, t, turn, step in forgotten]
    steps |= {(t, turn, step) for t, turn, step in read if t and None not in (turn, step)}
    return Exclusions({m for m, *_ in forgotten if m}, steps)


async def exclusions(session: AsyncSession, user_id: str) -> Exclusions:
    """`exclusions_of` read through `session`."""
    rows = [await run(session, q) for q in exclusion_queries(user_id)]
    return exclusions_of(*rows)


# A forgotten message, with the step that read it (if one did).
_FORGOTTEN = (
    select(
        Evidence.message_id,
        MessageRow.task_id,
        MessageRow.processed_turn,
        MessageRow.processed_step,
    )
    .outerjoin(MessageRow, MessageRow.id == Evidence.message_id)
    .where(
        Evidence.user_id == bindparam("user_id"),
        Evidence.usable.is_(False),
        Evidence.message_id.is_not(None),
    )
)
_STEPS_OF_DELETED = (
    select(MemoryUsage.task_id, MemoryUsage.turn, MemoryUsage.step)
    .join(MemoryVersion, MemoryVersion.id == MemoryUsage.version_id)
    .where(MemoryVersion.user_id == bindparam("user_id"), MemoryVersion.status == "deleted")
)
_LATEST_PROFILE = (
    select(ProfileSnapshot.version, ProfileSnapshot.items)
    .where(ProfileSnapshot.user_id == bindparam("user_id"))
    .order_by(ProfileSnapshot.version.desc())
    .limit(1)
)
# A task-scoped memory not bound to a task yet, extracted from a message of this task.
_UNBOUND = (
    select(Memory.id)
    .join(MemoryVersion, MemoryVersion.memory_id == Memory.id)
    .join(MemoryLink, MemoryLink.target_id == MemoryVersion.id)
    .join(Evidence, Evidence.id == MemoryLink.source_id)
    .join(MessageRow, MessageRow.id == Evidence.message_id)
    .where(
        Memory.user_id == bindparam("user_id"),
        Memory.scope == "task",
        Memory.task_id.is_(None),
        MessageRow.task_id == bindparam("task_id"),
    )
    .limit(1)
)

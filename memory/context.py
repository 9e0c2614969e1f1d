"""What the context builder gets from memory, and what it must leave out.

Retrieval is bounded by `memory_timeout_seconds` and never raises: a slow DB or a vector
index that is down degrades to "no memory this step" with the reason recorded, so a task
never fails because of memory (article §7.4).
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
from lomo.db.hot import Bound, HotQuery, prefetched
from lomo.db.models import MessageRow
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


@dataclass
class Exclusions:
    message_ids: set[str] = field(default_factory=set)
    step_keys: set[tuple[str, int, int]] = field(default_factory=set)


def profile_text(version: int, items: list[dict[str, object]]) -> str:
    if not items:
        return ""
    lines = [f"- {i['content']} [{i['memory_id']} v{i['version']}]" for i in items]
    return f"Profile of the person (v{version}):\n" + "\n".join(lines)


def profile_reads(user_id: str, task_id: str) -> list[Bound]:
    """The reads of `read_profile`, for a model step to send with its own (one round trip)."""
    return [_LATEST_PROFILE.bind(user_id=user_id), _UNBOUND.bind(user_id=user_id, task_id=task_id)]


async def _profile(deps: MemoryDeps, user_id: str, task_id: str) -> tuple[MemoryContext, bool]:
    """`read_profile` in a read transaction of its own."""
    async with deps.db.session() as s, prefetched(s, *profile_reads(user_id, task_id)):
        return await read_profile(s, user_id, task_id)


async def read_profile(s: AsyncSession, user_id: str, task_id: str) -> tuple[MemoryContext, bool]:
    """The profile snapshot, and whether a memory of this task waits to be bound to it."""
    profile = await _LATEST_PROFILE.rows(s, user_id=user_id)
    unbound = bool(await _UNBOUND.rows(s, user_id=user_id, task_id=task_id))
    if not profile:
        return MemoryContext(), unbound
    version, items = profile[0]
    return MemoryContext(
        profile_version=version,
        profile_text=profile_text(version, items),
        version_ids=[str(i["version_id"]) for i in items],
    ), unbound


async def _items(
    deps: MemoryDeps, user_id: str, task_id: str, query: str, skip: set[str], adopt: bool
) -> tuple[list[str], list[str]]:
    limit = deps.settings.memory_top_k
    if adopt:
        await _adopt_task_memories(deps, user_id, task_id)
    hits = await get_services(deps.settings).search(user_id, task_id, query, limit * 2)
    ids = [h.id for h in hits if h.id not in skip]
    if not ids:
        return [], []
    # The versions found and their sources in one round trip, as plain rows (they are read
    # on the path of every step of a person with memories).
    found, linked = _FOUND.bind(ids=ids), _SOURCES.bind(ids=ids)
    async with deps.db.session() as s, prefetched(s, found, linked):
        rows = await found.rows(s)
        sources = await linked.rows(s)
    prov: dict[str, list[str]] = {}
    for target, relation, ref in sources:
        prov.setdefault(target, []).append(f"{relation} {ref}")
    by_id = {r[0]: r for r in rows}
    items: list[str] = []
    used: list[str] = []
    for vid in ids:  # best first; SQL is the truth, a stale vector never leaks
        if vid not in by_id:
            continue
        _, v_status, content, version, mid, scope, m_task, m_status, m_user, kind = by_id[vid]
        visible = scope != "task" or m_task == task_id
        if v_status != "active" or m_status != "active" or m_user != user_id or not visible:
            continue
        where = ", ".join(prov.get(vid, []))
        items.append(f"{content} [{mid} v{version}, {kind}, {scope}; {where}]")
        used.append(vid)
        if len(items) >= limit:
            break
    return items, used


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
        items, used = await asyncio.wait_for(
            _items(deps, user_id, task_id, query, set(ctx.version_ids), unbound), left
        )
    except TimeoutError:
        ctx.degraded = f"memory search timed out after {timeout:g} s; profile only"
        return ctx
    except Exception as e:
        log.warning("memory search unavailable for %s: %r", user_id, e)
        ctx.degraded = f"memory search unavailable ({type(e).__name__}); profile only"
        return ctx
    ctx.items, ctx.version_ids = items, [*ctx.version_ids, *used]
    return ctx


# One row per memory version a step's context contained, written with the stored step in
# its round trip (plain INSERTs: the ORM's select-then-add cost the model step two round
# trips and about 4 ms under the agent-step bench, issue 14). A row already there is kept.
RECORD_USAGE = HotQuery(
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


def usage_writes(
    task_id: str, turn: int, step: int, version_ids: list[str], at: datetime
) -> list[Bound]:
    """The writes that remember which memory versions one step's context contained
    (idempotent: a version recorded before for the step is left as it is)."""
    return [
        RECORD_USAGE.bind(p_task=task_id, p_turn=turn, p_step=step, p_version=vid, p_at=at)
        for vid in dict.fromkeys(version_ids)
    ]


def exclusion_reads(user_id: str) -> list[Bound]:
    """The first reads of `exclusions`, to prefetch with a step's other reads."""
    return [_FORGOTTEN_MESSAGES.bind(user_id=user_id), _STEPS_OF_DELETED.bind(user_id=user_id)]


async def exclusions(session: AsyncSession, user_id: str) -> Exclusions:
    """Forgotten raw messages, and the steps whose outputs were derived from forgotten
    content (a context that held a deleted version, or a step that read a forgotten message)."""
    message_ids = set(await _FORGOTTEN_MESSAGES.scalars(session, user_id=user_id))
    steps = {
        (t, turn, step) for t, turn, step in await _STEPS_OF_DELETED.rows(session, user_id=user_id)
    }
    if message_ids:
        for t, turn, step in await _STEPS_OF_MESSAGES.rows(session, ids=sorted(message_ids)):
            if t is not None and turn is not None and step is not None:
                steps.add((t, turn, step))
    return Exclusions({m for m in message_ids if m}, steps)


# Read at every model step (lomo/db/hot.py).
_FOUND = HotQuery(
    select(
        MemoryVersion.id,
        MemoryVersion.status,
        MemoryVersion.content,
        MemoryVersion.version,
        Memory.id,
        Memory.scope,
        Memory.task_id,
        Memory.status,
        Memory.user_id,
        Memory.kind,
    )
    .join(Memory, Memory.id == MemoryVersion.memory_id)
    .where(MemoryVersion.id.in_(bindparam("ids", expanding=True)))
)
_SOURCES = HotQuery(
    select(MemoryLink.target_id, MemoryLink.relation, Evidence.source_ref)
    .join(Evidence, Evidence.id == MemoryLink.source_id)
    .where(MemoryLink.target_id.in_(bindparam("ids", expanding=True)), Evidence.usable.is_(True))
)
_FORGOTTEN_MESSAGES = HotQuery(
    select(Evidence.message_id).where(
        Evidence.user_id == bindparam("user_id"),
        Evidence.usable.is_(False),
        Evidence.message_id.is_not(None),
    )
)
_STEPS_OF_DELETED = HotQuery(
    select(MemoryUsage.task_id, MemoryUsage.turn, MemoryUsage.step)
    .join(MemoryVersion, MemoryVersion.id == MemoryUsage.version_id)
    .where(MemoryVersion.user_id == bindparam("user_id"), MemoryVersion.status == "deleted")
)
_STEPS_OF_MESSAGES = HotQuery(
    select(MessageRow.task_id, MessageRow.processed_turn, MessageRow.processed_step).where(
        MessageRow.id.in_(bindparam("ids", expanding=True)),
        MessageRow.processed_turn.is_not(None),
    )
)
_LATEST_PROFILE = HotQuery(
    select(ProfileSnapshot.version, ProfileSnapshot.items)
    .where(ProfileSnapshot.user_id == bindparam("user_id"))
    .order_by(ProfileSnapshot.version.desc())
    .limit(1)
)
# A task-scoped memory not bound to a task yet, extracted from a message of this task.
_UNBOUND = HotQuery(
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

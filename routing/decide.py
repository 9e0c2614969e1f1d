"""Routing's decisions over one transaction: what happens to a message once it is known
where it goes (a new task, an existing one, a question, a move, a plain answer). Each
returns the plan for the main thread; none calls a model or Temporal.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from cards.clarify import NEW_OPTION, clarify_card
from lomo.db.models import Card, MessageRow, Task
from lomo.events import append_event
from lomo.states import CardAction, CardKind, TaskKind
from lomo.words import say
from routing.errors import Unroutable
from routing.plans import RouteContext, message, record, recorded
from routing.policy import confirm_paid_calls, promotes
from routing.prompt import clip
from routing.text import detect_language
from routing.types import MOVE, RoutePlan
from tasks.lifecycle import create_task, followups, is_closed, promote, reopen

log = logging.getLogger(__name__)


async def answer(s: AsyncSession, ctx: RouteContext, msg: MessageRow, text: str) -> RoutePlan:
    """Lomo answers the message itself; no task takes it."""
    await append_event(s, msg.user_id, "task.reply", {"message_id": msg.id, "text": text})
    return ctx.plan("answer", msg.id)


async def apply(
    s: AsyncSession, ctx: RouteContext, msg: MessageRow, call: dict[str, Any], cands: list[str]
) -> RoutePlan:
    """Carry out the router's call; `cands` are the task ids it was shown."""
    decision = str(call["decision"])
    if decision == MOVE:
        return await move(s, ctx, msg, str(call.get("task_id") or ""), cands)
    if decision == "existing":
        task = await s.get(Task, str(call.get("task_id") or ""))
        if task is None or task.user_id != msg.user_id:
            # A task id the router made up: ask rather than guess.
            return await clarify(s, ctx, msg, cands[:4], "unknown task")
        if is_closed(task):
            return await clarify(s, ctx, msg, [task.id], task.status)
        return await existing(s, ctx, msg, task, bool(call.get("promote")))
    if decision == "clarify":
        ids = [str(i) for i in call.get("candidate_ids") or [] if str(i) in cands]
        return await clarify(s, ctx, msg, ids or cands[:4], "ambiguous")
    if decision in ("lightweight", "new"):
        return await create(s, ctx, msg, decision, str(call.get("briefing") or ""))
    return await answer(s, ctx, msg, str(call.get("answer") or ""))


async def create(
    s: AsyncSession, ctx: RouteContext, msg: MessageRow, decision: str, briefing: str
) -> RoutePlan:
    """A new task for the message: persistent for `new`, else lightweight."""
    kind = TaskKind.PERSISTENT if decision == "new" else TaskKind.LIGHTWEIGHT

    async def prepare(task: Task) -> None:
        await confirm_paid_calls(s, msg, task.id)

    task = await create_task(
        s,
        user_id=msg.user_id,
        kind=kind,
        goal=msg.text,
        summary=briefing,
        # The person's own words decide the language, never the router's briefing.
        language=detect_language(msg.text),
        now=ctx.clock(),
        prepare=prepare,
    )
    return ctx.plan(decision, msg.id, task.id, kind)


async def existing(
    s: AsyncSession, ctx: RouteContext, msg: MessageRow, task: Task, model_promote: bool
) -> RoutePlan:
    """Deliver to `task`: promoted by the policy, started again if its workflow ended."""
    promoted = promotes(task, await followups(s, task.id, msg.id), model_promote)
    if promoted:
        await promote(s, task)  # now in the task list; the workflow hears `promote`
    restart = reopen(task, ctx.clock())
    plan = ctx.plan("existing", msg.id, task.id, task.kind)
    plan.restart, plan.turn, plan.promote = restart, task.turn, promoted
    return plan


async def deterministic(s: AsyncSession, ctx: RouteContext, msg: MessageRow) -> RoutePlan:
    """The api settled the target (a finished task to start again): no model."""
    assert msg.task_id is not None
    if msg.processed_turn is not None:
        # Its task read it already, then ended; the api's direct hand-off came again (a
        # relay round or a client retry that saw it as not yet read) and found no running
        # workflow. Starting the task again would read it a second time: a repeat.
        plan = ctx.plan("existing", msg.id, msg.task_id)
        plan.repeat = True
        return plan
    task = await s.get(Task, msg.task_id)
    if task is None or is_closed(task):
        raise Unroutable("TaskClosed", f"task {msg.task_id} is closed")
    plan = await existing(s, ctx, msg, task, model_promote=False)
    return await record(s, ctx, msg, plan, [], 0)


async def move(
    s: AsyncSession, ctx: RouteContext, msg: MessageRow, task_id: str, cands: list[str]
) -> RoutePlan:
    """ "That was meant for the posters": the person's previous message goes to that
    task as a new message there (delivered by the main thread, like a follow-up); the
    task it left is told. `msg` itself is answered, not handed to any task."""
    task = await s.get(Task, task_id)
    if task is None or task.user_id != msg.user_id or is_closed(task):
        return await clarify(s, ctx, msg, cands[:4], "unknown task")
    assert ctx.mover is not None, "a move needs the context's mover"
    moved = await ctx.mover(s, msg, task)
    language = detect_language(msg.text)
    if moved is None:
        return await answer(s, ctx, msg, say("route.nothing_to_move", language))
    plan = await existing(s, ctx, moved.copy, task, model_promote=False)
    plan.decision, plan.message_id = MOVE, moved.copy.id
    plan.left_task, plan.left_message, plan.left_notice = moved.left()
    text = say("route.moved", language, goal=clip(task.goal, 80) or task.id)
    await append_event(s, msg.user_id, "task.reply", {"message_id": msg.id, "text": text})
    return plan


async def clarify(
    s: AsyncSession, ctx: RouteContext, msg: MessageRow, task_ids: list[str], reason: str
) -> RoutePlan:
    """Ask the person which task they meant (a clarify card); nothing is delivered yet."""
    tasks = [t for t in [await s.get(Task, i) for i in task_ids] if t is not None]
    card = await clarify_card(s, msg, tasks, reason, detect_language(msg.text))
    plan = ctx.plan("clarify", msg.id)
    plan.task_id = None
    log.info("asked %s about %s (%s)", card.id, msg.id, reason)
    return plan


async def clarified(s: AsyncSession, ctx: RouteContext, user_id: str, card_id: str) -> RoutePlan:
    """The person answered a clarify card: route its message as they chose."""
    done = await recorded(s, ctx, card_id)
    if done is not None:
        return done
    card = await s.get(Card, card_id)
    if card is None or card.user_id != user_id or card.kind != CardKind.CLARIFY:
        raise Unroutable("NoClarifyCard", f"no clarify card {card_id}")
    got = card.answer or {}
    msg = await message(s, user_id, str(card.payload.get("message_id")))
    choice = got.get("option_id") if got.get("action") == CardAction.SELECT else None
    task = await s.get(Task, str(choice)) if choice and choice != NEW_OPTION else None
    if task is not None and task.user_id == user_id:
        plan = await existing(s, ctx, msg, task, model_promote=False)
    elif choice == NEW_OPTION:
        plan = await create(s, ctx, msg, "new", "")
    else:
        plan = await answer(s, ctx, msg, say("route.okay", detect_language(msg.text)))
    return await record(s, ctx, msg, plan, [], 0, key=card_id)


async def failed(s: AsyncSession, ctx: RouteContext, user_id: str, key: str) -> None:
    """Routing gave up on an item (e.g. unusable router output): say so to the person
    instead of dropping the message silently. Idempotent per item."""
    if await recorded(s, ctx, key) is not None:
        return
    card = await s.get(Card, key) if key.startswith("crd_") else None
    msg_id = str(card.payload.get("message_id")) if card else key
    msg = await s.get(MessageRow, msg_id)
    if msg is None or msg.user_id != user_id:
        return  # nothing of this person's to answer
    plan = await answer(s, ctx, msg, say("route.lost", detect_language(msg.text)))
    await record(s, ctx, msg, plan, [], 0, key=key)

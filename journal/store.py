"""The agent step's storage: one call loads what a step needs, one call commits its record.

`StepStore` is the whole interface the runtime's activities use: `load_step` reads a step's
context inputs as one `StepData` (two batches: what decides the window, then the window),
`commit_step` stores the decision, planned calls, processed messages, the turn's status and
the reply's event in one transaction, and the tool-call journal (`open_call`,
`finish_call`) keeps each call's result under its id. The backend (`journal/backend.py`)
decides how the statements travel: one after another on SQLite, in one round trip per
batch on Postgres. `tests/test_step_store.py` holds both backends to the same results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Executable

from context.segments import ContextPolicy
from context.types import (
    AssetRow,
    CallRow,
    CardRow,
    ItemRow,
    MsgRow,
    OrderRow,
    Profile,
    StepData,
    StepRow,
    TaskHead,
    call_order,
)
from flows.runs import progress_lines
from journal import statements as st
from journal.backend import backend_for
from journal.status import pipelined_status, status_changed, write_changes
from journal.types import (
    CallRecord,
    CallResult,
    StatusChange,
    StepLoad,
    StepQuery,
    StepRecord,
    TurnFacts,
)
from lomo.db.engine import Database
from lomo.db.query import Query, Rows
from lomo.events import event_queries, ring
from lomo.states import CardStatus, EventType
from memory.context import (
    exclusion_queries,
    exclusions_of,
    profile_of,
    profile_queries,
    usage_queries,
)
from workspace.notices import linked_query, notice_lines, version_queries

# Calls are read from their step's time on, less a margin for clocks of one transaction.
CALL_TIME_MARGIN = timedelta(seconds=1)
CLOSED_ITEMS = ("done", "skipped")
OnFirst = Callable[[StepData, bool], None]


@dataclass(slots=True)
class Segment:
    steps: list[StepRow]
    kept: list[StepRow]  # the steps forgetting leaves in
    messages: dict[str, MsgRow]
    calls: dict[str, CallRow]  # by tool_use_id


class StepStore:
    def __init__(self, db: Database, policy: ContextPolicy) -> None:
        self.db = db
        self.policy = policy
        self.backend = backend_for(db.engine)
        self.pipelined = db.engine.dialect.name == "postgresql"

    # --- a model step ---------------------------------------------------------------------
    async def load_step(self, q: StepQuery, on_first: OnFirst | None = None) -> StepLoad:
        """The step's stored decision if it has one, else everything its context is built
        from. `on_first(data, unbound_memory)` runs once the task, the new messages and the
        profile are known, so a slower source (memory's search) starts while the window's
        rows travel."""
        async with self.backend.reads() as batch:
            first = _named(await batch(*_first_reads(q)), _FIRST)
            data, unbound, forgotten = self._first(q, first)
            heads = data.steps
            if first["stored"]:
                step_id, response = first["stored"][0]
                return StepLoad(data, (response, sum(s.id <= step_id for s in heads)))
            if on_first is not None:
                on_first(data, unbound)
            shown = self.policy.in_full(heads, data.summaries, data.excluded_steps)
            window = _window_reads(q, heads, shown)
            linked = first["linked"]
            got = await batch(*window, *version_queries(linked))
        _fill_window(data, shown, got[: len(window)], forgotten)
        data.notices = notice_lines(linked, got[len(window) :], q.task_id)
        if first["runs"]:  # most tasks never run a flow
            async with self.db.session() as s:
                data.flow_lines = await progress_lines(s, q.task_id)
        return StepLoad(data, None, unbound)

    def _first(self, q: StepQuery, r: dict[str, Rows]) -> tuple[StepData, bool, set[str]]:
        """The first batch's rows as the step's data; whether a task memory waits to be
        bound; the forgotten messages (left out of the window)."""
        if not r["task"]:
            raise LookupError(f"no task {q.task_id}")
        task = TaskHead(*r["task"][0])
        if task.user_id != q.user_id:
            raise PermissionError(f"task {q.task_id} is not the person's {q.user_id}")
        task.turn = q.turn  # the context shows the turn it is built for
        memory, unbound = profile_of(r["profile"], r["unbound"])
        excl = exclusions_of(r["forgotten"], r["of_deleted"])
        texts = {mid: text for mid, text in r["said"]}
        data = StepData(
            task=task,
            said=[texts[m] for m in q.message_ids if m in texts],
            steps=[StepRow(*row) for row in r["steps"]],
            summaries=self.policy.valid(r["summaries"]),
            prev_prefix=r["prefix"][0][0] if r["prefix"] else None,
            messages={},
            calls=[],
            items=[ItemRow(*row) for row in r["items"]],
            cards=[CardRow(*row) for row in r["cards"]],
            orders=[_order(row) for row in r["orders"]],
            assets=[AssetRow(*row) for row in r["assets"]],
            profile=Profile(memory.profile_text, memory.profile_version, tuple(memory.version_ids)),
            excluded_steps={(t, n) for tid, t, n in excl.step_keys if tid == q.task_id},
            message_ids=list(q.message_ids),
        )
        return data, unbound, excl.message_ids

    async def commit_step(self, rec: StepRecord) -> TurnFacts | None:
        """Store the step's record in one transaction; with `rec.turn_facts`, the turn's
        facts read in it. A second attempt of the same step fails on the step's unique
        (task, turn, step) and stores nothing."""
        rings: set[str] = set()
        running, at = rec.running, rec.running_at or rec.at
        lead = pipelined_status(running, at) if running and self.pipelined else []
        async with self.backend.transaction() as batch:
            if running is not None and not self.pipelined:
                rings |= await write_changes(batch, running, at, self.pipelined)
            marks, rest = _step_writes(rec)
            reads = _facts_reads(rec.task_id) if rec.turn_facts else []
            got = await batch(*marks, *lead, *rest, *reads, commit=True)
        if running is not None and lead:
            rings |= status_changed(got[len(marks) : len(marks) + len(lead)], running, False)
        if rec.reply:
            rings.add(rec.user_id)
        ring(rings, self.db.relay)
        if not rec.turn_facts:
            return None
        return turn_facts(_items(got[-2]), _cards(got[-1]), rec.turn)

    async def load_segment(self, task_id: str, user_id: str, first: int, last: int) -> Segment:
        """The steps `first`..`last` (ordinals in the task) with their messages and calls,
        and which of them forgetting excludes: what a segment's summary is written from."""
        t = {"task_id": task_id}
        async with self.backend.reads() as batch:
            heads, forgotten, of_deleted = await batch(
                Query(st.STEP_HEADS, t), *exclusion_queries(user_id)
            )
            steps = [StepRow(*r) for r in heads][first : last + 1]
            window = _window_reads(StepQuery(task_id, user_id, 0, 0, []), steps, steps)
            got = await batch(*window) if steps else []
        excl = exclusions_of(forgotten, of_deleted)
        data = StepData(TaskHead(task_id, user_id, "", "", "", "", 0), [], steps, {}, None, {}, [])
        if steps:
            _fill_window(data, steps, got, excl.message_ids)
        kept = [s for s in steps if (task_id, s.turn, s.step) not in excl.step_keys]
        return Segment(steps, kept, data.messages, {c.tool_use_id: c for c in data.calls})

    # --- status and the turn's facts -------------------------------------------------------
    async def write_status(self, change: StatusChange, at: datetime) -> bool:
        """The task's status as the workflow decided it, with its event if it changed;
        whether it changed. Raises `LookupError` for a task that does not exist."""
        async with self.backend.transaction() as batch:
            rings = await write_changes(batch, change, at, self.pipelined, check_task=True)
        ring(rings, self.db.relay)
        return bool(rings)

    async def fenced_out(self, task_id: str, fence: int) -> bool:
        """Whether a status write with this fencing token is older than the stored one."""
        async with self.backend.reads() as batch:
            (rows,) = await batch(Query(st.FENCED_OUT, {"p_id": task_id, "p_fence": fence}))
        return bool(rows)

    async def turn_facts(self, task_id: str, turn: int) -> TurnFacts:
        async with self.backend.reads() as batch:
            items, cards = await batch(*_facts_reads(task_id))
        return turn_facts(_items(items), _cards(cards), turn)

    # --- the tool-call journal -------------------------------------------------------------
    async def open_call(self, call_id: str, mark_started: bool, at: datetime) -> CallRecord | None:
        """The call's journal row and the domains its step could see. `mark_started`: lock
        the row and mark the call `started` unless it has its final result (a retry then
        knows it may have acted); otherwise only read it (an idempotent tool)."""
        turn, step, _ = call_order(call_id)
        task_id = call_id.rsplit(":", 3)[0]
        seen = Query(st.STEP_DOMAINS, {"task_id": task_id, "turn": turn, "step": step})
        if mark_started:
            async with self.backend.transaction() as batch:
                row, _, domains = await batch(
                    Query(st.LOCK_CALL, {"call_id": call_id}),
                    Query(st.START_CALL, {"p_id": call_id, "p_at": at}),
                    seen,
                    commit=True,
                )
        else:
            async with self.backend.reads() as batch:
                row, domains = await batch(Query(st.READ_CALL, {"call_id": call_id}), seen)
        if not row:
            return None
        record = CallRecord(*row[0])
        record.seen_domains = domains[0][0] if domains and domains[0][0] is not None else None
        return record

    async def finish_call(self, res: CallResult) -> tuple[bool, TurnFacts | None]:
        """Store the call's result (and its large output) unless an attempt stored its final
        result first: (stored, the turn's facts when asked for). Not stored: nothing of
        this attempt is kept; read the journal's result with `open_call`."""
        values = {"p_id": res.call_id, "p_status": res.status, "p_result": res.record}
        store = Query(st.CALL_RESULT, {**values, "p_at": res.at})
        reads = _facts_reads(res.task_id) if res.turn_facts_for else []
        try:
            async with self.backend.transaction() as batch:
                if res.output:
                    # The output only with the result: the commit waits for the verdict.
                    got = await batch(store, Query(st.KEEP_OUTPUT, _output_values(res)), *reads)
                    if not got[0]:
                        raise _NotStored
                else:
                    got = await batch(store, *reads, commit=True)
        except _NotStored:
            return False, None
        if not got[0]:
            return False, None
        if not res.turn_facts_for:
            return True, None
        return True, turn_facts(_items(got[-2]), _cards(got[-1]), res.turn_facts_for)


class _NotStored(Exception):
    """Another attempt stored the call's final result first: roll this one back."""


# --- reads and writes --------------------------------------------------------------------
_FIRST = (
    "stored", "task", "said", "profile", "unbound", "forgotten", "of_deleted", "linked",
    "steps", "prefix", "summaries", "items", "cards", "orders", "assets", "runs",
)  # fmt: skip


def _first_reads(q: StepQuery) -> list[Query]:
    """What decides a step's path and window, in the order of `_FIRST`."""
    t, u = {"task_id": q.task_id}, {"user_id": q.user_id}
    return [
        Query(st.STORED_STEP, {**t, "turn": q.turn, "step": q.step}),
        Query(st.TASK_HEAD, t),
        Query(st.MESSAGE_TEXTS, {"ids": q.message_ids}),
        *profile_queries(q.user_id, q.task_id),
        *exclusion_queries(q.user_id),
        linked_query(q.task_id),
        Query(st.STEP_HEADS, t),
        Query(st.LAST_PREFIX, t),
        Query(st.SUMMARIES, t),
        *_facts_reads(q.task_id),
        Query(st.ORDERS, t),
        Query(st.RECENT_ASSETS, u),
        Query(st.HAS_RUNS, t),
    ]


def _named(rows: list[Rows], names: tuple[str, ...]) -> dict[str, Rows]:
    return dict(zip(names, rows, strict=True))


def _window_reads(q: StepQuery, steps: list[StepRow], shown: list[StepRow]) -> list[Query]:
    """The messages shown (the opening request, those of the steps shown, this step's and
    those not processed yet), the responses and the calls of the steps shown in full."""
    params: dict[str, Any] = {"task_id": q.task_id}
    if q.message_ids:
        params["ids"] = q.message_ids
    if shown:
        params["from_turn"] = min(s.turn for s in shown)
    if steps:
        params["open_turn"], params["open_step"] = steps[0].turn, steps[0].step
    stmt: Executable = st.message_window(bool(q.message_ids), bool(shown), bool(steps))
    reads = [Query(stmt, params)]
    if shown:
        since = min(s.created_at for s in shown) - CALL_TIME_MARGIN
        reads.append(Query(st.RESPONSES, {"ids": [s.id for s in shown]}))
        reads.append(Query(st.WINDOW_CALLS, {"task_id": q.task_id, "since": since}))
    return reads


def _order(r: Any) -> OrderRow:
    ref = (r[5] or {}).get("reference_object_id")
    return OrderRow(r[0], r[1], r[2], r[3], r[4], str(ref) if ref else None)


def _attached(target: dict[str, Any] | None) -> tuple[str, ...]:
    """The objects a message points at: the one it is about, then its attachments."""
    t = target or {}
    ids = [t.get("object_id"), *t.get("attachments", [])]
    return tuple(dict.fromkeys(str(i) for i in ids if i))


def _fill_window(
    data: StepData, shown: list[StepRow], got: list[Rows], forgotten: set[str]
) -> None:
    data.messages = {
        r[0]: MsgRow(r[0], r[1], r[2], r[3], r[4], _attached(r[5]))
        for r in got[0]
        if r[0] not in forgotten
    }
    if not shown:
        return
    response: dict[int, Any] = dict(got[1])
    for s in shown:
        s.response = response[s.id]
    keys = {(s.turn, s.step) for s in shown}
    calls = [CallRow(*r) for r in got[2] if call_order(r[0])[:2] in keys]
    data.calls = sorted(calls, key=lambda c: call_order(c.call_id))


def _step_writes(rec: StepRecord) -> tuple[list[Query], list[Query]]:
    """The step's row with its messages marked, then the rest. A pipelined status change
    goes between them: the message rows are locked before the person's event counter
    (the order every writer of both keeps: taking, withdrawing and moving a message, so
    none of them deadlock), and the status is written before the task's new turn, which
    its condition reads."""
    key = {"p_task": rec.task_id, "p_turn": rec.turn, "p_step": rec.step, "p_at": rec.at}
    marks = [
        Query(
            st.STORE_STEP,
            {
                **key,
                "p_context": rec.context,
                "p_response": rec.response,
                "p_reported": rec.reported_orders or None,
            },
        ),
        Query(st.MARK_PROCESSED, {**key, "p_ids": rec.message_ids}),
    ]
    rest = [Query(st.TASK_TURN, key)]
    for c in rec.calls:
        values = {"p_id": c.call_id, "p_use": c.tool_use_id, "p_name": c.name, "p_input": c.input}
        rest.append(Query(st.PLAN_CALL, {**values, "p_task": rec.task_id, "p_at": rec.at}))
    if rec.reply:
        reply = {"task_id": rec.task_id, "text": rec.reply, "turn": rec.turn, "step": rec.step}
        rest += event_queries(rec.user_id, EventType.TASK_REPLY, reply, rec.at)
    # Which memory versions this output drew on: forgetting one excludes it.
    rest += usage_queries(rec.task_id, rec.turn, rec.step, rec.memory_versions, rec.at)
    return marks, rest


def _facts_reads(task_id: str) -> list[Query]:
    t = {"task_id": task_id}
    return [Query(st.ITEMS, t), Query(st.TASK_CARDS, t)]


def _items(rows: Rows) -> list[ItemRow]:
    return [ItemRow(*r) for r in rows]


def _cards(rows: Rows) -> list[CardRow]:
    return [CardRow(*r) for r in rows]


def _output_values(res: CallResult) -> dict[str, Any]:
    return {
        "p_id": res.output_id,
        "p_user": res.user_id,
        "p_task": res.task_id,
        "p_call": res.call_id,
        "p_content": res.output,
        "p_size": len(res.output),
        "p_at": res.at,
    }


def turn_facts(items: list[ItemRow], cards: list[CardRow], turn: int) -> TurnFacts:
    """The checklist summary the stop-check needs. The current step is the first one not
    closed; it is a checkpoint when it needs the person and no card asks about it yet."""
    decided = {
        str((c.payload or {}).get("item_id")) for c in cards if c.status != CardStatus.EXPIRED
    }
    facts = TurnFacts(
        checklist_total=len(items),
        checklist_open=sum(i.status not in CLOSED_ITEMS for i in items),
        blocked=next((f"{i.title}: {i.note}" for i in items if i.status == "blocked"), ""),
        progress=any(i.done_turn == turn for i in items),
        open_cards=sorted(c.id for c in cards if c.status == CardStatus.OPEN),
    )
    current = next((i for i in items if i.status not in CLOSED_ITEMS), None)
    if current and current.requires_confirmation and current.id not in decided:
        facts.checkpoint_due = current.id
    return facts

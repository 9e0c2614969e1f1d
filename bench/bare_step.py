"""The bare Temporal sides of bench/agent_step.py.

`BareStep`: an update whose handler waits until the workflow ran the model activity and the
tool activity (and, with two inferences, the model again), returning the reply. No DB, no
journal: the least a Temporal user writes.

The same workflow with `journal=True` is the least a Temporal user writes who also keeps the
conversation in Postgres, as Lomo does: the driver stores the message row (one INSERT,
committed) before the update, the model activity reads it and stores its decision, the
tool activity stores its result, each write committed on its own (psycopg, autocommit, one
round trip per statement). Its time against the bare step is what durability alone costs
on this machine; Lomo's against it is what the rest of Lomo costs (context, memory, events,
the status the person's stream reads).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from temporalio import activity, workflow

JOURNAL_DDL = (
    "CREATE TABLE IF NOT EXISTS bench_journal"
    " (id text PRIMARY KEY, kind text NOT NULL, body jsonb NOT NULL,"
    " at timestamptz NOT NULL DEFAULT now())"
)
# A retried activity finds its row and writes nothing more.
_WRITE = "INSERT INTO bench_journal (id, kind, body) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"


@dataclass
class BareDecision:
    tool: str
    reply: str


@dataclass
class JournalInput:
    key: str  # the message row's id; the decision's and result's rows are keyed from it
    decision: BareDecision | None = None


@activity.defn(name="bare_model")
async def bare_model(text: str) -> BareDecision:
    return BareDecision("lookup", "Looking it up")


@activity.defn(name="bare_tool")
async def bare_tool(d: BareDecision) -> str:
    return "42"


class JournalActivities:
    """The journaled activities, with the pool they write through."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool

    async def store_message(self, key: str, text: str) -> None:
        """The driver's store before the update (what an api would do)."""
        async with self.pool.connection() as c:
            await c.execute(_WRITE, (key, "message", Jsonb({"text": text})))

    @activity.defn(name="journal_model")
    async def model(self, inp: JournalInput) -> BareDecision:
        async with self.pool.connection() as c:
            cur = await c.execute("SELECT body FROM bench_journal WHERE id = %s", (inp.key,))
            if await cur.fetchone() is None:
                raise RuntimeError(f"no message {inp.key}")
            d = BareDecision("lookup", "Looking it up")
            step = "answer" if inp.decision else "decision"
            await c.execute(_WRITE, (f"{inp.key}:{step}", step, Jsonb(asdict(d))))
        return d

    @activity.defn(name="journal_tool")
    async def tool(self, inp: JournalInput) -> str:
        async with self.pool.connection() as c:
            await c.execute(_WRITE, (f"{inp.key}:result", "result", Jsonb({"result": "42"})))
        return "42"


@workflow.defn(name="BareStep")
class BareStep:
    def __init__(self) -> None:
        self.inbox: list[str] = []
        self.replies: dict[str, str] = {}
        self.inferences = 1

    @workflow.run
    async def run(self, inferences: int, journal: bool = False) -> None:
        self.inferences = inferences
        opts: dict[str, Any] = {"start_to_close_timeout": timedelta(minutes=1)}
        while True:
            await workflow.wait_condition(lambda: bool(self.inbox))
            text = self.inbox.pop(0)
            if journal:  # `text` is the stored message's key
                d = await workflow.execute_activity(
                    "journal_model", JournalInput(text), result_type=BareDecision, **opts
                )
                result = await workflow.execute_activity(
                    "journal_tool", JournalInput(text, d), result_type=str, **opts
                )
                if self.inferences == 2:
                    d = await workflow.execute_activity(
                        "journal_model", JournalInput(text, d), result_type=BareDecision, **opts
                    )
            else:
                d = await workflow.execute_activity(bare_model, text, **opts)
                result = await workflow.execute_activity(bare_tool, d, **opts)
                if self.inferences == 2:
                    d = await workflow.execute_activity(bare_model, result, **opts)
            self.replies[text] = f"{d.reply}: {result}"

    @workflow.update
    async def message(self, text: str) -> str:
        self.inbox.append(text)
        await workflow.wait_condition(lambda: text in self.replies)
        return self.replies.pop(text)

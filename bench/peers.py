"""The agent step in the peers, on the same Postgres and the same Temporal dev server.

    .venv/bin/python bench/peers.py [--steps 100]

One step: a message → the model asks for a tool (stub model) → the tool runs (stub tool)
→ the model replies with the tool's result. That is two inferences, the usual tool loop,
so the figures compare with `bench/agent_step.py --inferences 2`, which this bench also
runs in the same process (Lomo and bare Temporal) so that every row shares one run.

* Actant (PyPI `actant`): its `AgentRuntime` with the SQLAlchemy Postgres projection
  stores, its `FakeLLM`, one function tool; a step is `thread.send()` until the thread's
  workflow run ends (Actant ends a run when the inbox is drained).
* LangGraph with `AsyncPostgresSaver`: model node → `ToolNode` → model node, checkpointed
  per step on one thread id; a step is one `ainvoke`. No Temporal: durability is the
  checkpoint after each node.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool as lc_tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from bench import agent_step
from bench.support import HEADER, connect, dev_server, fresh_pg, machine, row

WARMUP = 5


async def actant_step(address: str, steps: int) -> tuple[list[float], float]:
    from actant import AgentDefinition
    from actant.llm.messages import ToolCall, ToolCallFunction
    from actant.llm.providers.fake import FakeLLM, FakeResponse
    from actant.runtime import AgentRuntime
    from actant.runtime.stores.postgres import SQLAlchemyRuntimeStores, create_schema
    from actant.runtime.temporal.types import TemporalRuntimeConfig
    from actant.tools import ToolRegistry, tool
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    @tool
    async def lookup(q: str) -> dict[str, str]:
        """Look a fact up (bench stub)."""
        return {"answer": "42"}

    responses: list[Any] = []
    for n in range(WARMUP + steps):
        call = ToolCall(id=f"c{n}", function=ToolCallFunction(name="lookup", arguments='{"q":"x"}'))
        responses += [FakeResponse(tool_calls=[call]), FakeResponse(text="The answer is 42.")]
    agent = AgentDefinition(
        id="bench", name="Bench", persona="You look things up.", llm=FakeLLM(responses),
        tools=ToolRegistry([lookup]),
    )  # fmt: skip

    async def resolve(agent_id: str, thread_id: str) -> Any:
        return agent

    _, url = fresh_pg("actant")
    engine = create_async_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    await create_schema(engine)
    client = await connect(address)
    runtime = AgentRuntime(
        client=client,
        stores=SQLAlchemyRuntimeStores(async_sessionmaker(engine, expire_on_commit=False)),
        config=TemporalRuntimeConfig(task_queue="actant-bench"),
        resolve_agent=resolve,
    )
    polling = asyncio.create_task(runtime.run_worker())
    times: list[float] = []
    cpu = 0.0
    try:
        from uuid import uuid4

        thread = runtime.thread(agent.id, uuid4())
        for n in range(WARMUP + steps):
            t0, c0 = time.perf_counter(), time.process_time()
            wf = await thread.send(f"look up {n}")
            await client.get_workflow_handle(wf).result()
            if n >= WARMUP:
                times.append((time.perf_counter() - t0) * 1000)
                cpu += (time.process_time() - c0) * 1000 / steps
    finally:
        await runtime.shutdown()
        polling.cancel()
        await asyncio.gather(polling, return_exceptions=True)
        await engine.dispose()
    return times, cpu


async def langgraph_step(steps: int) -> tuple[list[float], float]:
    @lc_tool
    def lookup(q: str) -> str:
        """Look a fact up (bench stub)."""
        return "42"

    def model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(content=f"The answer is {last.content}.")]}
        call = {"name": "lookup", "args": {"q": "x"}, "id": f"c{len(state['messages'])}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", ToolNode([lookup]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tools", END])
    g.add_edge("tools", "model")
    url, _ = fresh_pg("langgraph")
    times: list[float] = []
    cpu = 0.0
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        graph = g.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "bench"}}
        for n in range(WARMUP + steps):
            t0, c0 = time.perf_counter(), time.process_time()
            out = await graph.ainvoke({"messages": [HumanMessage(f"look up {n}")]}, config)
            assert out["messages"][-1].content == "The answer is 42."
            if n >= WARMUP:
                times.append((time.perf_counter() - t0) * 1000)
                cpu += (time.process_time() - c0) * 1000 / steps
    return times, cpu


async def main(steps: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-peers-"))
    server, address = dev_server(tmp)
    lines = [HEADER]
    try:
        lines += await agent_step.run(steps, 2, tmp, address)
        actant, cpu = await actant_step(address, steps)
        lines.append(
            row("Actant 0.41 (Temporal, Postgres stores)", actant, f"CPU {cpu:.0f} ms/step")
        )
        graph, cpu = await langgraph_step(steps)
        lines.append(row("LangGraph + AsyncPostgresSaver", graph, f"CPU {cpu:.0f} ms/step"))
    finally:
        server.terminate()
        server.wait(timeout=15)
    sys.stdout.write("\n".join([*lines, f"machine: {machine()}"]) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    asyncio.run(main(p.parse_args().steps))

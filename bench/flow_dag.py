"""A 200-node flow as one durable run: time to schedule, history per node, orders.

    .venv/bin/python bench/flow_dag.py [--nodes 200] [--parallel 8] [--db sqlite|postgres]

Starts a Temporal dev server (a SQLite file, as `lomo up`), the simulator (fast: an image
in 0.1 s, a clip in 0.25 s, so what is measured is mostly the platform), the api and an
in-process worker on a SQLite DB (or `--db postgres`); builds a random layered DAG (each
node takes up to 3 inputs from the 30 nodes before it; roots are images, the rest videos
and edits), then:
1. first run: POST /runs → price card (one, for the whole graph) → confirmed → succeeded;
   wall time, time per node, orders placed, history events and JSON bytes per node, and
   the time to schedule (from the history: a node's inputs done → its first activity
   scheduled; with a large `--parallel` that is the scheduling alone, without slot waits);
2. re-run with nothing changed: every node reused, no order, no card; wall time (pure
   scheduling: plan, one start activity per node);
3. one root's prompt edited: re-runs that node and its descendants only; orders placed
   equals 1 + its descendants.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import Client

from bench.support import connect, dev_server, fresh_pg
from flows.graph import descendants, edges_of, topological_order
from lomo.db.migrate import upgrade
from tests.flow_support import (
    confirm_price,
    create_flow,
    orders,
    owning_task,
    price_cards,
    start_run,
    wait_status,
)
from tests.stack import running_stack


def dag(n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    nodes: dict[str, Any] = {}
    for i in range(n):
        pool = list(nodes)[-30:]
        ins = rng.sample(pool, k=min(len(pool), rng.randint(0, 3))) if i >= 10 else []
        if not ins:
            nodes[f"n{i:03d}"] = {"type": "image", "params": {"prompt": f"frame {i}"}, "inputs": []}
        elif len(ins) == 1:
            nodes[f"n{i:03d}"] = {
                "type": "video",
                "params": {"prompt": f"clip {i}", "duration_s": 2},
                "inputs": ins,
            }
        else:
            nodes[f"n{i:03d}"] = {"type": "edit", "params": {"prompt": f"cut {i}"}, "inputs": ins}
    return {"nodes": nodes}


def depth(nodes: dict[str, Any]) -> int:
    """The critical path: the most nodes any chain of inputs runs through."""
    level: dict[str, int] = {}
    for nid in topological_order(nodes):
        level[nid] = 1 + max((level[i] for i in nodes[nid]["inputs"]), default=0)
    return max(level.values())


async def _history(client: Client, run_id: str) -> tuple[int, int]:
    h = await client.get_workflow_handle(f"flowrun:{run_id}").fetch_history()
    return len(h.events), len(h.to_json())


async def schedule_delays(client: Client, run_id: str, nodes: dict[str, Any]) -> list[float]:
    """Per node, from the history: seconds from the moment its inputs were all done (the
    end of its inputs' last activities; for a root, the end of planning) to its first
    activity being scheduled. This includes waiting for a free slot (the parallel bound)."""
    h = await client.get_workflow_handle(f"flowrun:{run_id}").fetch_history()
    scheduled: dict[int, tuple[str, str]] = {}
    first: dict[str, float] = {}
    ended: dict[str, float] = {}
    planned = 0.0
    for e in h.events:
        at = e.event_time.ToDatetime().timestamp()
        if e.HasField("activity_task_scheduled_event_attributes"):
            a = e.activity_task_scheduled_event_attributes
            node = a.activity_id.split("/")[0]
            scheduled[e.event_id] = (node, a.activity_type.name)
            if a.activity_type.name == "start_flow_node":
                first.setdefault(node, at)
        elif e.HasField("activity_task_completed_event_attributes"):
            node, name = scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]
            if name == "plan_flow_run":
                planned = at
            elif name in ("start_flow_node", "finish_flow_node"):
                ended[node] = at
    return [
        first[n] - max((ended[i] for i in nodes[n]["inputs"]), default=planned)
        for n in nodes
        if n in first
    ]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="flow-bench-"))
    server, address = dev_server(tmp)
    try:
        client = await connect(address)
        if args.db == "postgres":
            _, url = fresh_pg("lomo_flow")
        else:
            url = f"sqlite+aiosqlite:///{tmp / 'lomo.db'}"
        upgrade(url)
        async with running_stack(
            tmp,
            url,
            address,
            client,
            "flow-bench",
            flow_max_parallel=args.parallel,
            initial_credit_cents=10_000_000,
            generation_wait_seconds=2.0,
        ) as st:
            await st.sim.post("/sim/faults", json={"latency_scale": args.latency})
            content = dag(args.nodes, args.seed)
            task_id = await owning_task(st.db, st.user_id)
            flow_id = await create_flow(st, content)

            t0 = time.monotonic()
            run_id = await start_run(st, flow_id, task_id)
            card = await confirm_price(st, run_id)
            t_card = time.monotonic() - t0
            view = await wait_status(st, run_id, "succeeded", "failed", within=1800)
            wall = time.monotonic() - t0
            assert view["status"] == "succeeded", view["reason"]
            events, size = await _history(client, run_id)
            delays = await schedule_delays(client, run_id, content["nodes"])
            placed = await orders(st.db, st.user_id)
            levels = depth(content["nodes"])
            print(
                f"{args.db}: nodes {args.nodes}, parallel {args.parallel}, "
                f"critical path {levels} nodes"
            )
            print(
                f"first run: {wall:.1f} s ({1000 * wall / args.nodes:.0f} ms per node, "
                f"{wall / levels:.2f} s per level of the critical path; plan "
                f"and price card shown after {t_card:.2f} s, {card['price']['amount_cents']} "
                f"cents), orders {placed}, history {events} events "
                f"({events / args.nodes:.1f} per node), {size / 1024:.0f} KB JSON "
                f"({size / args.nodes / 1024:.1f} KB per node)"
            )
            print(
                f"time to schedule a node once its inputs are done: p50 "
                f"{1000 * pct(delays, 0.5):.0f} ms, p90 {1000 * pct(delays, 0.9):.0f} ms, "
                f"max {1000 * max(delays):.0f} ms (includes waiting for one of "
                f"{args.parallel} slots)"
            )

            t0 = time.monotonic()
            again = await start_run(st, flow_id, task_id)
            view = await wait_status(st, again, "succeeded", "failed", within=600)
            wall = time.monotonic() - t0
            events, size = await _history(client, again)
            new_orders = await orders(st.db, st.user_id) - placed
            print(
                f"unchanged re-run: {wall:.1f} s ({1000 * wall / args.nodes:.1f} ms per node), "
                f"reused {view['progress']['reused']}, orders {new_orders}, "
                f"cards {len(await price_cards(st)) - 1}, history {events} events, "
                f"{size / 1024:.0f} KB"
            )

            root = "n000"
            below = descendants(edges_of(content["nodes"]), [root])
            nodes = dict(content["nodes"])
            r = await st.api.patch(
                f"/v1/objects/{flow_id}",
                json={
                    "base_version": 1,
                    "nodes": {root: {**nodes[root], "params": {"prompt": "new"}}},
                },
                headers=st.auth,
            )
            assert r.status_code == 200, r.text
            before = await orders(st.db, st.user_id)
            t0 = time.monotonic()
            third = await start_run(st, flow_id, task_id)
            if 1 + len(below) > 1:
                await confirm_price(st, third)
            view = await wait_status(st, third, "succeeded", "failed", within=600)
            wall = time.monotonic() - t0
            print(
                f"one root edited: {wall:.1f} s, orders {await orders(st.db, st.user_id) - before} "
                f"(the node and its {len(below)} descendants), reused "
                f"{view['progress']['reused']}"
            )
    finally:
        server.terminate()
        server.wait(timeout=15)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--parallel", type=int, default=8)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    # The simulator's latency factor on top of its test speed (0.05): 1 → a clip in 0.25 s.
    p.add_argument("--latency", type=float, default=1.0)
    asyncio.run(main(p.parse_args()))

"""A flow run survives a SIGKILLed worker process and a SIGKILLed Temporal dev server (on
its SQLite file, started again) mid-run: no call key is ordered twice, at most one
upstream job per order, and the books balance to the cent. Callbacks that arrive while the
server is down wake nobody; the run's compensating polls find the orders' ends. A node
whose submit the kill made unclear is sent again with its key (the simulator honours
idempotency keys, the default) and adopts its job; were the upstream not idempotent, it
would fail by the refund rule and run again under a new key when the person resumes."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from lomo.db.models import GenerationOrder
from lomo.temporal import start_dev_server
from money.orders import UNCLEAR_SUBMIT
from tests.flow_support import confirm_price, create_flow, film, run_view, start_run, wait_status
from tests.helpers import eventually, free_port
from tests.runtime_support import Workers, kill, worker_env
from tests.test_money import money_env

pytestmark = pytest.mark.slow


async def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _dev_server(db_file: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    return start_dev_server(db_file, "127.0.0.1", port, None, log)


async def test_a_run_survives_a_killed_worker_and_a_restarted_dev_server(
    tmp_path: Path, db_url: str, task_queue: str
) -> None:
    port, db_file = free_port(), tmp_path / "temporal.db"
    server = _dev_server(db_file, port, tmp_path / "temporal.log")
    address = f"127.0.0.1:{port}"
    try:
        await eventually(lambda: _listening(port), within=60)
        async with money_env(tmp_path, db_url, address, task_queue=task_queue) as m:
            await m.sim.post("/sim/faults", json={"latency_scale": 16})  # ~4 s per clip
            env = worker_env(
                tmp_path,
                db_url,
                address,
                task_queue,
                LOMO_SIM_URL=m.settings.resolved_sim_url,
                LOMO_API_URL=m.settings.resolved_api_url,
                LOMO_HEARTBEAT_TIMEOUT_SECONDS="2",
                LOMO_GENERATION_WAIT_SECONDS="2",
                LOMO_FLOW_MAX_PARALLEL="2",
            )
            with Workers(env, tmp_path) as workers:
                first = workers.spawn("worker1")
                flow_id = await create_flow(m, film(6))
                run_id = await start_run(m, flow_id, m.task_id)
                await confirm_price(m, run_id)

                async def placed(n: int) -> bool:
                    view = await run_view(m, run_id)
                    return sum(bool(v["order_id"]) for v in view["nodes"].values()) >= n

                await eventually(lambda: placed(2), within=60)
                kill(first)  # mid-run: two clips are out at the simulator
                workers.spawn("worker2")
                await eventually(lambda: placed(4), within=90)
                server.kill()  # the dev server dies too, and comes back on its file
                server.wait(timeout=10)
                await asyncio.sleep(1)
                server = _dev_server(db_file, port, tmp_path / "temporal2.log")
                view = await wait_status(m, run_id, "succeeded", "failed", within=180)
                unclear = {n for n, v in view["nodes"].items() if v["status"] == "failed"}
                if view["status"] == "failed":
                    # Only the refund rule (an upstream without idempotency keys) fails
                    # an order killed between the POST and persisting its job id. The
                    # person resumes; the node gets a new order under a new attempt.
                    assert all(UNCLEAR_SUBMIT in view["nodes"][n]["error"] for n in unclear)
                    r = await m.api.post(f"/v1/flow-runs/{run_id}/resume", headers=m.auth)
                    assert r.status_code == 202, r.text
                    await confirm_price(m, run_id)
                    view = await wait_status(m, run_id, "succeeded", "failed", within=180)
                assert view["status"] == "succeeded", (view["reason"], view["nodes"])
                async with m.db.session() as s:
                    rows = list(await s.scalars(select(GenerationOrder)))
                keys = [o.idempotency_key for o in rows]
                assert len(keys) == len(set(keys)) == 7 + len(unclear)  # no key ordered twice
                done = [o for o in rows if o.status == "succeeded"]
                assert len(done) == 7  # one result per node
                assert all(o.error == UNCLEAR_SUBMIT for o in rows if o.status == "failed")
                assert len(await m.jobs()) <= len(rows)  # at most one upstream job per order
    finally:
        server.kill()
        server.wait(timeout=10)

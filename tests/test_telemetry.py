"""Observability on a real run: one trace from the HTTP message through the workflows, the
model step and the tool; the platform's and the Temporal SDK's metrics at /metrics of the
api and of the worker's listener, moving with the run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from activities.registry import build_activities
from api.app import create_app
from cli.worker import make_worker
from lomo import telemetry
from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.settings import Settings
from sim.app import create_app as create_sim
from tests.helpers import ThreadServer, eventually, free_port


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _tree(spans: Sequence[ReadableSpan], root: ReadableSpan) -> set[str]:
    """Names of every span below `root` in its trace."""
    children: dict[int, list[ReadableSpan]] = {}
    for s in spans:
        if s.parent is not None:
            children.setdefault(s.parent.span_id, []).append(s)
    out: set[str] = set()
    todo = [root]
    while todo:
        s = todo.pop()
        out.add(s.name)
        todo.extend(children.get(s.context.span_id, []))
    return out


async def test_one_trace_and_moving_metrics(
    tmp_path: Path, db_url: str, temporal_server: str, task_queue: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    api_port, sim_port, metrics_port = free_port(), free_port(), free_port()
    settings = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        temporal_address=temporal_server,
        task_queue=task_queue,
        api_port=api_port,
        sim_port=sim_port,
        generation_wait_seconds=5.0,
        model_provider="offline",
    )
    db = Database(db_url)
    async with db.session() as s:
        _, token = await create_user(s, "observer")
    auth = {"Authorization": f"Bearer {token}"}
    client = await Client.connect(
        temporal_server,
        runtime=telemetry.temporal_runtime(),
        interceptors=telemetry.temporal_interceptors(provider),
    )
    listener = telemetry.serve_metrics(metrics_port, "127.0.0.1")
    assert listener is not None
    sim_app = create_sim(
        tmp_path / "sim",
        settings.callback_secret.get_secret_value(),
        speed=0.05,
        token=settings.sim_token.get_secret_value(),
    )
    try:
        with (
            ThreadServer(sim_app, sim_port),
            ThreadServer(create_app(settings, tracer_provider=provider), api_port) as api_srv,
        ):
            async with (
                httpx.AsyncClient(timeout=30) as http,
                httpx.AsyncClient(base_url=api_srv.url, timeout=30) as api,
            ):
                before = (await api.get("/metrics")).text
                acts = build_activities(settings, db, http)
                async with make_worker(client, settings, acts):
                    r = await api.post(
                        "/v1/messages",
                        json={"text": "Generate an image of a red tabby cat"},
                        headers=auth,
                    )
                    assert r.status_code == 202, r.text
                    mid = r.json()["message_id"]

                    async def task_id() -> str | None:
                        m = (await api.get(f"/v1/messages/{mid}", headers=auth)).json()
                        return m["routing"].get("task_id")

                    tid = await eventually(task_id)

                    async def done() -> bool:
                        t = (await api.get(f"/v1/tasks/{tid}", headers=auth)).json()
                        return t["status"] == "completed"

                    await eventually(done, within=60)
                after = (await api.get("/metrics")).text
                worker_side = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    finally:
        listener[0].shutdown()
        await db.dispose()

    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.name == "POST /v1/messages" and s.parent is None]
    assert len(roots) == 1, sorted({s.name for s in spans})
    below = _tree(spans, roots[0])
    for name in (
        "SignalWithStartWorkflow:MainThreadWorkflow",  # the api hands the message over
        "RunWorkflow:MainThreadWorkflow",
        "RunActivity:route_message",
        "StartChildWorkflow:TaskWorkflow",
        "RunWorkflow:TaskWorkflow",
        "RunActivity:model_step",
        "RunActivity:run_tool",
        "HandleSignal:generation_event",  # the callback's signal, handled in the task
        "RunActivity:collect_generation",
    ):
        assert name in below, (name, sorted(below))
    # The vendor's callback is its own HTTP request; its signal is traced under it.
    callbacks = [s for s in spans if s.name == "POST /v1/generation/callbacks"]
    assert callbacks, sorted({s.name for s in spans})
    assert any("SignalWorkflow:generation_event" in _tree(spans, c) for c in callbacks)

    # The platform's counters moved with the run (one process: api and worker share them).
    def moved(name: str, **labels: str) -> float:
        return _metric(after, name, **labels) - _metric(before, name, **labels)

    assert moved("lomo_model_steps_total") >= 1  # the plan; the runtime shows the result
    assert moved("lomo_tool_calls_total", tool="generate_image", status="done") >= 1
    assert moved("lomo_messages_routed_total", kind="lightweight") >= 1
    assert moved("lomo_orders_total", state="succeeded") >= 1
    assert moved("lomo_money_cents_total", entry="reserve") > 0
    assert moved("lomo_money_cents_total", entry="settle") > 0
    assert moved("lomo_memory_retrieval_seconds_count") >= 1
    # The Temporal SDK's runtime metrics are on the same endpoints.
    assert re.search(r"^temporal_request(_total)?\{", after, re.M), after[:2000]
    assert re.search(r"^temporal_workflow_task_execution_latency_(sum|count)", worker_side, re.M)
    assert "lomo_model_steps_total" in worker_side


def test_traces_are_off_by_default_and_go_over_otlp_http_when_set() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    assert telemetry.tracer_provider(Settings(otel_endpoint=None), "lomo-test") is None
    assert telemetry.temporal_interceptors(None) == []
    got: list[tuple[str, str, int]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers["Content-Length"])
            self.rfile.read(size)
            got.append((self.path, self.headers["Content-Type"], size))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", free_port()), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_port}"
        provider = telemetry.tracer_provider(Settings(otel_endpoint=endpoint), "lomo-test")
        assert provider is not None
        with provider.get_tracer("t").start_as_current_span("a message"):
            pass
        assert provider.force_flush(10_000)
        provider.shutdown()
    finally:
        server.shutdown()
    assert got and got[0][0] == "/v1/traces"
    assert got[0][1] == "application/x-protobuf" and got[0][2] > 0

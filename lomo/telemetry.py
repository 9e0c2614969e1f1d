"""Metrics and traces of every process, in the kernel so every room can count.

Metrics: the platform's own counters below and the Temporal SDK's runtime metrics, both in
prometheus_client's default registry, served as text at `/metrics` (the api's route; the
worker's small listener on `LOMO_WORKER_METRICS_PORT`). The SDK's metrics reach the
registry through a `MetricBuffer` drained at every scrape, so one endpoint carries both.

Traces: off unless `LOMO_OTEL_ENDPOINT` is set; then spans go over OTLP/HTTP to
`{endpoint}/v1/traces`. The Temporal `TracingInterceptor` (client in the api, worker)
carries the context through workflows and activities; FastAPI is instrumented in the api.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any
from wsgiref.simple_server import WSGIServer

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import REGISTRY, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from temporalio.client import Interceptor
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_GAUGE,
    BufferedMetricUpdate,
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
)

from lomo.settings import Settings

log = logging.getLogger(__name__)

# --- the platform's own metrics ------------------------------------------------------------
MESSAGES_ROUTED = Counter(
    "lomo_messages_routed",
    "Messages routed, by how (deterministic or the router's decision)",
    ["kind"],
)
MODEL_STEPS = Counter("lomo_model_steps", "Model steps stored (decisions persisted)")
TOOL_CALLS = Counter(
    "lomo_tool_calls", "Tool calls finished, by tool and status", ["tool", "status"]
)
ORDERS = Counter("lomo_orders", "Generation orders entering a state", ["state"])
MONEY_CENTS = Counter(
    "lomo_money_cents", "Money booked in the ledger, by entry (reserve, settle, refund)", ["entry"]
)
MEMORY_RETRIEVAL = Histogram(
    "lomo_memory_retrieval_seconds",
    "Memory retrieval for a context (profile and search), degraded ones included",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
DEGRADATIONS = Counter("lomo_degradations", "A service degraded instead of failing", ["what"])


# --- the Temporal SDK's runtime metrics ----------------------------------------------------
class TemporalMetrics(Collector):
    """Keeps the SDK's buffered updates as Prometheus series: counters add their deltas,
    gauges keep the last value, histograms become a count and a sum (a summary)."""

    def __init__(self, buffer: MetricBuffer) -> None:
        self.buffer = buffer
        self.lock = threading.Lock()
        self.kinds: dict[str, int] = {}
        self.help: dict[str, str] = {}
        self.values: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self.counts: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}

    def absorb(self, updates: Sequence[BufferedMetricUpdate]) -> None:
        with self.lock:
            for u in updates:
                name = u.metric.name
                self.kinds[name] = u.metric.kind
                self.help[name] = u.metric.description or name
                labels = tuple(sorted((k, str(v)) for k, v in u.attributes.items()))
                series = self.values.setdefault(name, {})
                if u.metric.kind == BUFFERED_METRIC_KIND_GAUGE:
                    series[labels] = float(u.value)
                else:
                    series[labels] = series.get(labels, 0.0) + float(u.value)
                    counts = self.counts.setdefault(name, {})
                    counts[labels] = counts.get(labels, 0.0) + 1

    def drain(self) -> None:
        try:
            self.absorb(self.buffer.retrieve_updates())
        except RuntimeError:
            pass  # no runtime yet: nothing recorded

    def collect(self) -> Iterable[Metric]:
        self.drain()
        with self.lock:
            for name, series in sorted(self.values.items()):
                kind = self.kinds[name]
                keys = sorted({k for labels in series for k, _ in labels})
                if kind in (BUFFERED_METRIC_KIND_COUNTER, BUFFERED_METRIC_KIND_GAUGE):
                    family = (
                        CounterMetricFamily
                        if kind == BUFFERED_METRIC_KIND_COUNTER
                        else GaugeMetricFamily
                    )(name, self.help[name], labels=keys)
                    for labels, v in series.items():
                        family.add_metric(_vals(keys, labels), v)
                    yield family
                else:
                    fam = Metric(name, self.help[name], "summary")
                    for labels, v in series.items():
                        d = dict(labels)
                        fam.add_sample(f"{name}_sum", d, v)
                        fam.add_sample(f"{name}_count", d, self.counts[name][labels])
                    yield fam


def _vals(keys: list[str], labels: tuple[tuple[str, str], ...]) -> list[str]:
    d = dict(labels)
    return [d.get(k, "") for k in keys]


@lru_cache(maxsize=1)
def temporal_runtime() -> Runtime:
    """One SDK runtime per process whose metrics land in the registry (cached: a second
    Runtime would double the SDK's threads)."""
    buffer = MetricBuffer(100_000, MetricBufferDurationFormat.SECONDS)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    REGISTRY.register(TemporalMetrics(buffer))
    return runtime


def serve_metrics(port: int, host: str) -> tuple[WSGIServer, threading.Thread] | None:
    """The worker's listener (a thread); a taken port is logged, never fatal."""
    if not port:
        return None
    try:
        served = start_http_server(port, addr=host)
    except OSError as e:
        log.warning("metrics listener on %s:%s not started: %s", host, port, e)
        return None
    log.info("metrics on http://%s:%s/metrics", host, port)
    return served


# --- traces --------------------------------------------------------------------------------
def tracer_provider(settings: Settings, service: str) -> TracerProvider | None:
    """The exporting provider when `LOMO_OTEL_ENDPOINT` is set, else None: no spans are
    recorded and no interceptor is installed. Passed explicitly (Temporal interceptor,
    FastAPI instrumentation), never made the global provider."""
    if not settings.otel_endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    endpoint = settings.otel_endpoint.rstrip("/") + "/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def temporal_interceptors(provider: Any | None) -> list[Interceptor]:
    """The Temporal tracing interceptor for a client (its workers inherit it)."""
    if provider is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(tracer=provider.get_tracer("lomo"))]

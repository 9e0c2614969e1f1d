"""The FastAPI application factory: state (settings, database, blob store, Temporal client,
stream slots), error handlers, middleware, the routers and the hand-off relay."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from temporalio.client import Client

from api import errors, openapi
from api.dispatch import TemporalGetter
from api.limits import DEFAULT_BODY, BodyLimit, body_limit
from api.rate_store import SharedBuckets
from api.ratelimit import ADDRESS_BURST, ADDRESS_PER_MINUTE, RateLimit, StreamSlots
from api.routes import (
    agui,
    budget,
    callbacks,
    cards,
    events,
    flows,
    health,
    messages,
    metrics,
    nudges,
    objects,
    payments,
    session,
    tasks,
    thread,
    tokens,
    users,
)
from api.routes import memory as memory_routes
from api.security import SecurityHeaders, mount_docs
from api.services.relay import relay_loop
from lomo import telemetry
from lomo.bell_notify import NotifyListener
from lomo.bell_relay import BellRelay
from lomo.db.engine import Database
from lomo.events import commit_relay, notify_listener
from lomo.hosts import TrustedHosts
from lomo.settings import Settings
from lomo.temporal import connect
from web import mount as mount_web
from workspace.blobs import make_asset_store


def _lazy_temporal(settings: Settings, provider: TracerProvider | None) -> TemporalGetter:
    """Connect on first use so the api starts (and answers /healthz) before Temporal does."""
    lock = asyncio.Lock()
    client: list[Client] = []

    async def get() -> Client:
        async with lock:
            if not client:
                client.append(
                    await connect(
                        settings,
                        telemetry.temporal_runtime(),
                        telemetry.temporal_interceptors(provider),
                    )
                )
        return client[0]

    return get


def _lifespan(
    settings: Settings, relay: BellRelay | None, listener: NotifyListener | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Wake-ups from other processes' commits and the hand-off relay, for the app's life."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Other processes' commits (the worker's, other replicas') wake this api's streams.
        if listener is not None:
            listener.listen()
        elif relay is not None:
            relay.listen()
        handoffs = (
            asyncio.create_task(
                relay_loop(app.state.db, app.state.temporal, settings, app.state.assets)
            )
            if settings.handoff_relay_seconds > 0
            else None
        )
        try:
            yield
        finally:
            if handoffs is not None:
                handoffs.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await handoffs
            if listener is not None:
                await listener.close()
            if relay is not None:
                relay.close()
            await app.state.db.dispose()

    return lifespan


def _temporal_getter(
    temporal: Client | None, settings: Settings, provider: TracerProvider | None
) -> TemporalGetter:
    """The client a test gives, else one connected on first use."""
    if temporal is None:
        return _lazy_temporal(settings, provider)
    fixed = temporal

    async def given() -> Client:
        return fixed

    return given


def _include_routers(app: FastAPI) -> None:
    for r in (
        health,
        users,
        messages,
        tasks,
        cards,
        objects,
        thread,
        events,
        callbacks,
        flows,
        tokens,
        session,
        budget,
        payments,
        memory_routes,
        agui,
        nudges,
    ):
        app.include_router(r.router)


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """Added innermost first: each one added later wraps the ones before it."""
    app.add_middleware(
        BodyLimit, limit=DEFAULT_BODY, upload_limit=body_limit(settings.max_upload_bytes)
    )
    # Outermost: a token over its rate costs neither a body read nor a DB lookup.
    app.add_middleware(
        RateLimit,
        per_minute=settings.rate_limit_per_minute,
        burst=settings.rate_limit_burst,
        shared=SharedBuckets(app.state.db, ADDRESS_PER_MINUTE, ADDRESS_BURST),
    )
    app.add_middleware(SecurityHeaders)  # on the app's answers and the limits' refusals
    # Outside even that: a request for another site's name (DNS rebinding) gets nothing.
    app.add_middleware(TrustedHosts, allowed=settings.trusted_hosts)


def create_app(
    settings: Settings,
    temporal: Client | None = None,
    tracer_provider: TracerProvider | None = None,
) -> FastAPI:
    """`tracer_provider`: tests pass an in-memory one; else traces follow LOMO_OTEL_ENDPOINT."""
    provider = tracer_provider or telemetry.tracer_provider(settings, "lomo-api")
    url = settings.resolved_database_url
    relay = commit_relay(url, settings.bell_dir)
    listener = notify_listener(url) if relay is None else None
    app = FastAPI(
        title="Lomo",
        version="0.1.0",
        lifespan=_lifespan(settings, relay, listener),
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.db = Database(url, relay=relay)
    app.state.bell_listener = listener
    app.state.assets = make_asset_store(settings)
    app.state.streams = StreamSlots(settings.max_sse_per_person)
    app.state.temporal = _temporal_getter(temporal, settings, provider)
    errors.install(app)
    _include_routers(app)
    _add_middleware(app, settings)
    app.include_router(metrics.router)
    if provider is not None:
        FastAPIInstrumentor.instrument_app(app, tracer_provider=provider)
    openapi.install(app)
    mount_docs(app)
    mount_web(app)
    return app

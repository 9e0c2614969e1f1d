"""`lomo memory`: the memory service process, the one owner of the vector index and of
the memory writes (memory/server.py). Workers and the api reach it at `memory_url`."""

from __future__ import annotations

import asyncio
import logging

import uvicorn

from activities.registry import build_provider
from lomo.db.engine import Database
from lomo.events import bell_relay
from lomo.settings import Settings
from memory.server import create_memory_app
from memory.services import MemoryServices
from memory.writes import MemoryWrites
from vectors import open_owned_index
from vectors.embeddings import get_embedder

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> None:
    # Its commits (memory updates, episodes) wake the api's streams like the worker's.
    db = Database(settings.resolved_database_url, relay=bell_relay(settings.bell_dir))
    services = MemoryServices(open_owned_index(settings), get_embedder(settings))
    writes = MemoryWrites(db, settings, build_provider(settings), services)
    backend = "qdrant-server" if settings.vector_url else "embedded"
    app = create_memory_app(writes, backend)
    config = uvicorn.Config(app, host=settings.host, port=settings.memory_port, log_level="warning")
    log.info("memory service (%s index) on %s:%s", backend, settings.host, settings.memory_port)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await services.index.close()  # the embedded engine flushes its files
        await db.dispose()


def main(settings: Settings) -> None:
    asyncio.run(serve(settings))

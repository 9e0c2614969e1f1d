"""Readiness: can this api reach its database and Temporal."""

from __future__ import annotations

from sqlalchemy import text

from api.dispatch import TemporalGetter
from api.schemas.health import Checks, Readiness
from lomo.db.engine import Database
from lomo.settings import Settings
from memory.client import MemoryClient

MEMORY_CHECK_SECONDS = 2.0


async def _memory(settings: Settings) -> str:
    if not settings.memory_url:
        return "in-process"
    client = MemoryClient(settings.memory_url, MEMORY_CHECK_SECONDS)
    try:
        await client.health()
        return "ok"
    except Exception as e:
        return f"error: {e!r}"
    finally:
        await client.close()


async def readiness(db: Database, temporal: TemporalGetter, settings: Settings) -> Readiness:
    """Reports, never raises: each check is "ok" or the error it met."""
    try:
        async with db.session() as s:
            await s.execute(text("SELECT 1"))
        db_check = "ok"
    except Exception as e:
        db_check = f"error: {e}"
    try:
        client = await temporal()
        await client.service_client.check_health()
        temporal_check = "ok"
    except Exception as e:
        temporal_check = f"error: {e}"
    checks = Checks(db=db_check, temporal=temporal_check, memory=await _memory(settings))
    ready = db_check == temporal_check == "ok"
    return Readiness(service="lomo-api", ready=ready, checks=checks)

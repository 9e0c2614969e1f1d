"""Liveness and readiness, unauthenticated (probes and `lomo up` call them)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import DbDep, SettingsDep, TemporalGetterDep
from api.schemas.health import Alive, Readiness
from api.services.health import readiness

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Alive:
    return Alive(status="ok")


@router.get("/readyz", responses={503: {"model": Readiness, "description": "Not ready"}})
async def readyz(
    response: Response, db: DbDep, temporal: TemporalGetterDep, settings: SettingsDep
) -> Readiness:
    ready = await readiness(db, temporal, settings)
    if not ready.ready:
        response.status_code = 503
    return ready

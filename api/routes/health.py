from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from api.deps import DbDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, db: DbDep) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        async with db.session() as s:
            await s.execute(text("SELECT 1"))
        checks["db"] = "ok"
    except Exception as e:  # readiness reports, it does not raise
        checks["db"] = f"error: {e}"
    try:
        client = await request.app.state.temporal()
        await client.service_client.check_health()
        checks["temporal"] = "ok"
    except Exception as e:
        checks["temporal"] = f"error: {e}"
    ok = all(v == "ok" for v in checks.values())
    # `service` lets `lomo up` tell its own api from another server holding the port.
    body = {"service": "lomo-api", "ready": ok, "checks": checks}
    return JSONResponse(body, status_code=200 if ok else 503)

"""Prometheus metrics of this api process: the platform's counters (lomo/telemetry.py) and
the Temporal SDK's runtime metrics. Unauthenticated like /healthz: scraped from inside the
deployment's network (docker-compose.yml's prometheus service)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

router = APIRouter(tags=["health"])


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

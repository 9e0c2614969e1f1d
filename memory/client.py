"""The typed client of the memory service (`lomo memory`, memory/server.py), used by the
workers' memory activities and the api's readiness.

A refusal (no such card, not confirmed: no retry changes it) raises `Refused`; a service
that is down or slow raises httpx's errors, which the caller's retries or degradation
handle.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import httpx

from memory.types import (
    CorrectInput,
    CorrectOutput,
    ExtractInput,
    ExtractOutput,
    ForgetInput,
    ForgetOutput,
)
from memory.writes import Refused

SERVICE = "lomo-memory"


class MemoryClient:
    def __init__(self, url: str, timeout: float) -> None:
        self._http = httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout)

    async def _job(self, path: str, body: Any) -> dict[str, Any]:
        r = await self._http.post(path, json=asdict(body))
        if r.status_code == 422:
            raise Refused(str(r.json().get("detail", r.text)))
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    async def extract(self, inp: ExtractInput) -> ExtractOutput:
        return ExtractOutput(**await self._job("/v1/extract", inp))

    async def forget(self, inp: ForgetInput) -> ForgetOutput:
        return ForgetOutput(**await self._job("/v1/forget", inp))

    async def correct(self, inp: CorrectInput) -> CorrectOutput:
        return CorrectOutput(**await self._job("/v1/correct", inp))

    async def health(self) -> dict[str, Any]:
        """The service's /healthz body; raises when it does not answer as itself."""
        r = await self._http.get("/healthz")
        r.raise_for_status()
        body: dict[str, Any] = r.json()
        if body.get("service") != SERVICE:
            raise httpx.HTTPError(f"not the memory service: {body!r}")
        return body

    async def close(self) -> None:
        await self._http.aclose()

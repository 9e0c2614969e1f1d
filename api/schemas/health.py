"""Liveness and readiness of the api process."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Alive(BaseModel):
    status: Literal["ok"]


class Checks(BaseModel):
    db: str = Field(description='"ok" or "error: ..."')
    temporal: str = Field(description='"ok" or "error: ..."')
    memory: str = Field(
        default="in-process",
        description='the memory service: "ok", "error: ..." or "in-process" (none configured,'
        " memory runs in the worker); memory down degrades steps, it never makes the api unready",
    )


class Readiness(BaseModel):
    service: Literal["lomo-api"] = Field(
        description="lets `lomo up` tell its own api from another server on the port"
    )
    ready: bool
    checks: Checks

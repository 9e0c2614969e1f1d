"""A generation upstream's job report and its acknowledgement."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class JobReport(BaseModel):
    """A job report as the upstream sends it; bounded so no value can break a column."""

    model_config = ConfigDict(extra="allow")
    job_id: str = Field(min_length=1, max_length=80)
    status: str = Field(min_length=1, max_length=20)
    progress: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    seq: int | None = Field(default=None, ge=-1, le=2**31 - 1)
    idempotency_key: str | None = Field(default=None, max_length=120)
    result_url: str | None = None
    error: str | None = None


class CallbackAck(BaseModel):
    ok: bool
    changed: bool = Field(description="false for a duplicate or out-of-order report")

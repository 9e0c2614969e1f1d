"""Sign-in and tokens: who a token speaks for."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class CheckIn(BaseModel):
    token: str = Field(min_length=1, max_length=400)


class Validity(BaseModel):
    valid: bool


class SessionView(BaseModel):
    user_id: str
    name: str
    channel: str = Field(description="app for the person's own token, api for an API token")
    max_upload_bytes: int


class TokenIn(BaseModel):
    name: str = Field(default="api", min_length=1, max_length=200)
    expires_in_days: int = Field(default=90, ge=1, le=365)


class NewApiToken(BaseModel):
    token_id: str
    kind: Literal["api"]
    token: str = Field(description="shown this once; only its hash is stored")
    expires_at: datetime


class ApiTokenView(BaseModel):
    token_id: str
    name: str
    created_at: datetime
    expires_at: datetime | None = Field(description="null for a token that never expires")
    revoked_at: datetime | None
    active: bool = Field(description="neither revoked nor expired")


class ApiTokenList(BaseModel):
    tokens: list[ApiTokenView]


class UserIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class NewUser(BaseModel):
    user_id: str
    name: str
    token: str

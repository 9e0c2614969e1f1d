"""Sign-in and tokens: who a token speaks for."""

from __future__ import annotations

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


class NewApiToken(BaseModel):
    token_id: str
    kind: Literal["api"]
    token: str


class UserIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class NewUser(BaseModel):
    user_id: str
    name: str
    token: str

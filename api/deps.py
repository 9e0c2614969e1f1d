"""Annotated dependencies, in one place."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from lomo.auth import principal_for_token
from lomo.db.engine import Database
from lomo.db.models import User
from lomo.errors import Unauthorized
from lomo.settings import Settings
from workspace.store import BlobStore


# Every dependency is `async def`, even when it awaits nothing: FastAPI runs a plain `def`
# in its thread pool, a thread hop per dependency per request.
async def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


async def get_session(db: Annotated[Database, Depends(get_db)]) -> AsyncIterator[AsyncSession]:
    async with db.session() as s:
        yield s


async def get_temporal(request: Request) -> Client:
    client: Client = await request.app.state.temporal()
    return client


async def get_assets(request: Request) -> BlobStore:
    store: BlobStore = request.app.state.assets
    return store


def _bearer(authorization: str | None) -> str:
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Unauthorized("missing bearer token")
    return authorization[7:].strip()


async def current_user(
    request: Request,
    db: Annotated[Database, Depends(get_db)],
    authorization: Annotated[str | None, Header()] = None,
) -> User:
    token = _bearer(authorization)
    async with db.session() as s:
        user, channel = await principal_for_token(s, token)
    request.state.channel = channel
    return user


async def current_channel(request: Request, _: Annotated[User, Depends(current_user)]) -> str:
    """`app` for the person's own token, `api` for an open-API token."""
    channel: str = request.state.channel
    return channel


async def require_admin(
    settings: Annotated[Settings, Depends(get_settings_dep)],
    authorization: Annotated[str | None, Header()] = None,
) -> None:
    token = _bearer(authorization)
    if not hmac.compare_digest(token, settings.admin_token.get_secret_value()):
        raise Unauthorized("admin token required")


# Integers compared with or stored in INTEGER columns: larger ones are refused as bad
# input (422) instead of overflowing the database driver (a 500).
MAX_DB_INT = 2**31 - 1

SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
DbDep = Annotated[Database, Depends(get_db)]
# scope="function": the unit of work commits before the response is sent. With the
# default ("request") FastAPI runs the exit code after sending, so a client could use what
# it was just given (a new person's token) before it exists: the scenario harness saw a
# fresh token answer 401 on Postgres.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
TemporalDep = Annotated[Client, Depends(get_temporal)]
UserDep = Annotated[User, Depends(current_user)]
ChannelDep = Annotated[str, Depends(current_channel)]
AssetsDep = Annotated[BlobStore, Depends(get_assets)]
AdminDep = Annotated[None, Depends(require_admin)]

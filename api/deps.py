"""The api's dependencies, each precisely typed: handlers declare what they need with the
`Annotated` aliases at the bottom (`CurrentUser`, `SessionDep`, `SettingsDep`, ...)."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Query, Request
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from api.dispatch import TemporalGetter
from api.ratelimit import StreamSlots
from api.services.card_effects import HandoffState
from api.services.pages import DEFAULT_LIMIT, MAX_LIMIT, page_of
from lomo.auth import principal_for_token
from lomo.db.engine import Database
from lomo.db.models import User
from lomo.db.pages import Page
from lomo.errors import Forbidden, Unauthorized
from lomo.settings import Settings
from lomo.signing import refusal
from workspace.store import BlobStore


# Every dependency is `async def`, even when it awaits nothing: FastAPI runs a plain `def`
# in its thread pool, a thread hop per dependency per request.
async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


async def get_session(db: Annotated[Database, Depends(get_db)]) -> AsyncIterator[AsyncSession]:
    async with db.session() as s:
        yield s


async def get_temporal_getter(request: Request) -> TemporalGetter:
    getter: TemporalGetter = request.app.state.temporal
    return getter


async def get_temporal(getter: Annotated[TemporalGetter, Depends(get_temporal_getter)]) -> Client:
    return await getter()


async def get_assets(request: Request) -> BlobStore:
    store: BlobStore = request.app.state.assets
    return store


async def get_streams(request: Request) -> StreamSlots:
    slots: StreamSlots = request.app.state.streams
    return slots


async def get_handoff_state(
    db: Annotated[Database, Depends(get_db)],
    settings: Annotated[Settings, Depends(get_settings)],
    assets: Annotated[BlobStore, Depends(get_assets)],
    temporal: Annotated[TemporalGetter, Depends(get_temporal_getter)],
) -> HandoffState:
    return HandoffState(db, settings, assets, temporal)


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


async def app_user(
    user: Annotated[User, Depends(current_user)],
    channel: Annotated[str, Depends(current_channel)],
) -> User:
    """The person in their own app, not a program holding one of their API tokens: money
    settings, approvals, tokens and irreversible confirmations need this channel."""
    if channel != "app":
        raise Forbidden("this needs the person's app session; an API token cannot do it")
    return user


async def require_admin(
    settings: Annotated[Settings, Depends(get_settings)],
    authorization: Annotated[str | None, Header()] = None,
) -> None:
    token = _bearer(authorization)
    if not hmac.compare_digest(token, settings.admin_token.get_secret_value()):
        raise Unauthorized("admin token required")


async def signed_body(
    request: Request,
    settings: Annotated[Settings, Depends(get_settings)],
    x_lomo_signature: Annotated[str | None, Header()] = None,
) -> bytes:
    """The raw body of a signed report (generation callback, payment webhook), checked
    before anything parses it: the signature covers these exact bytes."""
    body = await request.body()
    refused = refusal(
        settings.callback_secret.get_secret_value(),
        body,
        x_lomo_signature,
        settings.callback_max_age_seconds,
    )
    if refused:
        raise Unauthorized(refused)
    return body


async def get_page(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="rows per page")] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None, Query(max_length=120, description="the `next` of the previous page")
    ] = None,
) -> Page:
    """Any list's page: `limit` rows after the `cursor` a previous page gave (422 if bad)."""
    return page_of(cursor, limit)


SettingsDep = Annotated[Settings, Depends(get_settings)]
# The database itself, for services that commit more than once per request (store a
# message, then hand it to Temporal) or hold no session between reads (the event stream).
DbDep = Annotated[Database, Depends(get_db)]
# One unit of work per request, committed on success and rolled back on an error.
# scope="function": it commits before the response is sent. With the default ("request")
# FastAPI runs the exit code after sending, so a client could use what it was just given
# (a new person's token) before it exists: the scenario harness saw a fresh token answer
# 401 on Postgres.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
# Connected at once (the route needs Temporal to answer at all).
TemporalDep = Annotated[Client, Depends(get_temporal)]
# Connected on first use (the route stores first, then hands over within a bound).
TemporalGetterDep = Annotated[TemporalGetter, Depends(get_temporal_getter)]
CurrentUser = Annotated[User, Depends(current_user)]
ChannelDep = Annotated[str, Depends(current_channel)]
AppUser = Annotated[User, Depends(app_user)]
AssetsDep = Annotated[BlobStore, Depends(get_assets)]
StreamsDep = Annotated[StreamSlots, Depends(get_streams)]
HandoffDep = Annotated[HandoffState, Depends(get_handoff_state)]
AdminDep = Annotated[None, Depends(require_admin)]
PageDep = Annotated[Page, Depends(get_page)]
SignedBody = Annotated[bytes, Depends(signed_body)]

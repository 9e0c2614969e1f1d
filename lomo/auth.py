"""Bearer tokens: random, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo import clock
from lomo.db.models import ApiToken, User
from lomo.errors import NotFound, Unauthorized
from lomo.ids import new_id


def hash_token(token: str) -> str:
    # Tokens carry 256 bits of entropy, so a fast unsalted hash is enough to make a leaked
    # table useless; a slow KDF would only slow every request.
    return hashlib.sha256(token.encode()).hexdigest()


async def create_user(
    session: AsyncSession, name: str, token: str | None = None
) -> tuple[User, str]:
    token = token or f"lomo_{secrets.token_urlsafe(32)}"
    user = User(id=new_id("usr"), name=name, token_hash=hash_token(token), event_seq=0)
    session.add(user)
    await session.flush()
    return user, token


async def user_for_token(session: AsyncSession, token: str) -> User:
    return (await principal_for_token(session, token))[0]


async def principal_for_token(session: AsyncSession, token: str) -> tuple[User, str]:
    """The person behind a token and the channel it speaks for: `app` or the open `api`."""
    digest = hash_token(token)
    user = await session.scalar(select(User).where(User.token_hash == digest))
    if user is not None:
        return user, "app"
    api = await session.scalar(select(ApiToken).where(ApiToken.token_hash == digest))
    if api is not None and usable(api, clock.now()):
        if (owner := await session.get(User, api.user_id)) is not None:
            return owner, "api"
    # One answer for unknown, revoked and expired: the caller learns nothing about a token
    # that is not theirs to use.
    raise Unauthorized("unknown, revoked or expired token")


def usable(token: ApiToken, now: datetime) -> bool:
    if token.revoked_at is not None:
        return False
    return token.expires_at is None or clock.utc(token.expires_at) > now


async def create_api_token(
    session: AsyncSession, user_id: str, name: str, lifetime: timedelta
) -> tuple[ApiToken, str]:
    """A new token row and the token itself, which is shown once and never stored."""
    token = f"lomo_api_{secrets.token_urlsafe(32)}"
    now = clock.now()
    row = ApiToken(
        id=new_id("tok"),
        user_id=user_id,
        name=name,
        token_hash=hash_token(token),
        created_at=now,
        expires_at=now + lifetime,
    )
    session.add(row)
    await session.flush()
    return row, token


async def api_tokens(session: AsyncSession, user_id: str) -> list[ApiToken]:
    q = select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.created_at)
    return list(await session.scalars(q))


async def revoke_api_token(session: AsyncSession, user_id: str, token_id: str) -> ApiToken:
    """Revoked at once for every later request; revoking twice keeps the first time."""
    row = await session.get(ApiToken, token_id, with_for_update=True)
    if row is None or row.user_id != user_id:
        raise NotFound(f"no token {token_id}")
    if row.revoked_at is None:
        row.revoked_at = clock.now()
    return row

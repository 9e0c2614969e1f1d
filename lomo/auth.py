"""Bearer tokens: random, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import ApiToken, User
from lomo.errors import Unauthorized
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
    if api is not None and (owner := await session.get(User, api.user_id)) is not None:
        return owner, "api"
    raise Unauthorized("unknown or revoked token")


async def create_api_token(session: AsyncSession, user_id: str, name: str) -> tuple[str, str]:
    token = f"lomo_api_{secrets.token_urlsafe(32)}"
    row = ApiToken(id=new_id("tok"), user_id=user_id, name=name, token_hash=hash_token(token))
    session.add(row)
    await session.flush()
    return row.id, token

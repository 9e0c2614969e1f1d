"""Bearer tokens: random, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lomo.db.models import User
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
    user = await session.scalar(select(User).where(User.token_hash == hash_token(token)))
    if user is None:
        raise Unauthorized("unknown or revoked token")
    return user

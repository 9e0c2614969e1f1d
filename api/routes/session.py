"""The page's sign-in: is a pasted token someone's, and who am I with it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import ChannelDep, DbDep, SettingsDep, UserDep
from lomo.auth import principal_for_token
from lomo.errors import Unauthorized

router = APIRouter(prefix="/v1/session", tags=["session"])


class CheckIn(BaseModel):
    token: str = Field(min_length=1, max_length=400)


@router.post("/check")
async def check(body: CheckIn, db: DbDep) -> dict[str, bool]:
    """200 either way, so a wrong paste is a message on the sign-in page, not an error; it
    says nothing about whose token it is."""
    async with db.session() as s:
        try:
            await principal_for_token(s, body.token.strip())
        except Unauthorized:
            return {"valid": False}
    return {"valid": True}


@router.get("")
async def me(user: UserDep, channel: ChannelDep, settings: SettingsDep) -> dict[str, Any]:
    return {
        "user_id": user.id,
        "name": user.name,
        "channel": channel,
        "max_upload_bytes": settings.max_upload_bytes,
    }

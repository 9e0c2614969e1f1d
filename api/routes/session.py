"""The page's sign-in: is a pasted token someone's, and who am I with it."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ChannelDep, CurrentUser, SessionDep, SettingsDep
from api.schemas.session import CheckIn, SessionView, Validity
from lomo.auth import principal_for_token
from lomo.errors import Unauthorized

router = APIRouter(prefix="/v1/session", tags=["session"])


@router.post("/check")
async def check(body: CheckIn, session: SessionDep) -> Validity:
    """200 either way, so a wrong paste is a message on the sign-in page, not an error; it
    says nothing about whose token it is."""
    try:
        await principal_for_token(session, body.token.strip())
    except Unauthorized:
        return Validity(valid=False)
    return Validity(valid=True)


@router.get("")
async def me(user: CurrentUser, channel: ChannelDep, settings: SettingsDep) -> SessionView:
    return SessionView(
        user_id=user.id,
        name=user.name,
        channel=channel,
        max_upload_bytes=settings.max_upload_bytes,
    )

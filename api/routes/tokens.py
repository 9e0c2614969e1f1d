"""Open-API tokens, minted by the person for programs that act for them."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ChannelDep, CurrentUser, SessionDep
from api.schemas.session import NewApiToken, TokenIn
from lomo.auth import create_api_token
from lomo.errors import Unauthorized

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


@router.post("", status_code=201)
async def add_api_token(
    body: TokenIn, user: CurrentUser, channel: ChannelDep, session: SessionDep
) -> NewApiToken:
    """An open-API token for a program acting for the person: tasks it drives confirm
    every paid call one by one. Only the person's own (app) token can mint one."""
    if channel != "app":
        raise Unauthorized("an API token cannot create tokens")
    token_id, token = await create_api_token(session, user.id, body.name)
    return NewApiToken(token_id=token_id, kind="api", token=token)

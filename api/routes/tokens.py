from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import ChannelDep, DbDep, UserDep
from lomo.auth import create_api_token
from lomo.errors import Unauthorized

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


class TokenIn(BaseModel):
    name: str = Field(default="api", min_length=1, max_length=200)


@router.post("", status_code=201)
async def add_api_token(
    body: TokenIn, user: UserDep, channel: ChannelDep, db: DbDep
) -> dict[str, str]:
    """An open-API token for a program acting for the person: tasks it drives confirm
    every paid call one by one. Only the person's own (app) token can mint one."""
    if channel != "app":
        raise Unauthorized("an API token cannot create tokens")
    async with db.session() as s:
        token_id, token = await create_api_token(s, user.id, body.name)
    return {"token_id": token_id, "kind": "api", "token": token}

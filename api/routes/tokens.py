"""Open-API tokens, minted by the person for programs that act for them. Only the person's
app session mints, lists and revokes them; every token expires."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter

from api.deps import AppUser, SessionDep
from api.schemas.session import ApiTokenList, ApiTokenView, NewApiToken, TokenIn
from lomo import clock
from lomo.auth import api_tokens, create_api_token, revoke_api_token, usable
from lomo.db.models import ApiToken

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


@router.post("", status_code=201)
async def add_api_token(body: TokenIn, user: AppUser, session: SessionDep) -> NewApiToken:
    """An open-API token for a program acting for the person: tasks it drives confirm
    every paid call one by one, on cards only the person's app can confirm."""
    row, token = await create_api_token(
        session, user.id, body.name, timedelta(days=body.expires_in_days)
    )
    assert row.expires_at is not None
    return NewApiToken(token_id=row.id, kind="api", token=token, expires_at=row.expires_at)


@router.get("")
async def list_api_tokens(user: AppUser, session: SessionDep) -> ApiTokenList:
    """Every API token of the person, revoked and expired ones included (never the token)."""
    return ApiTokenList(tokens=[_view(t) for t in await api_tokens(session, user.id)])


@router.delete("/{token_id}")
async def revoke(token_id: str, user: AppUser, session: SessionDep) -> ApiTokenView:
    """Revoked for every later request at once; revoking again answers the same."""
    return _view(await revoke_api_token(session, user.id, token_id))


def _view(t: ApiToken) -> ApiTokenView:
    return ApiTokenView(
        token_id=t.id,
        name=t.name,
        created_at=clock.utc(t.created_at),
        expires_at=t.expires_at and clock.utc(t.expires_at),
        revoked_at=t.revoked_at and clock.utc(t.revoked_at),
        active=usable(t, clock.now()),
    )

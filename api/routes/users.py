"""People, created by the operator with the admin token."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import AdminDep, SessionDep
from api.schemas.session import NewUser, UserIn
from lomo.auth import create_user

router = APIRouter(prefix="/v1/admin", tags=["users"])


@router.post("/users", status_code=201)
async def add_user(body: UserIn, _: AdminDep, session: SessionDep) -> NewUser:
    """A person and their own (app) token, shown this once."""
    user, token = await create_user(session, body.name)
    return NewUser(user_id=user.id, name=user.name, token=token)

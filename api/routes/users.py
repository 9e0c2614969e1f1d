from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import AdminDep, SessionDep
from lomo.auth import create_user

router = APIRouter(prefix="/v1/admin", tags=["users"])


class UserIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)


@router.post("/users", status_code=201)
async def add_user(body: UserIn, _: AdminDep, session: SessionDep) -> dict[str, str]:
    user, token = await create_user(session, body.name)
    return {"user_id": user.id, "name": user.name, "token": token}

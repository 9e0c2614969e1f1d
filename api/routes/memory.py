"""Memory: what is remembered of the person, its history, forgetting (a card) and
correcting."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import CurrentUser, DbDep, PageDep, SessionDep, SettingsDep, TemporalDep
from api.schemas.common import CardRef
from api.schemas.memory import CorrectIn, ForgetIn, MemoryHistory, MemoryList, Profile
from api.services import memory
from lomo.errors import InvalidInput
from memory import views
from memory.cards import request_forget_card

router = APIRouter(prefix="/v1/memory", tags=["memory"])


@router.get("", response_model_exclude_unset=True)
async def list_memories(
    user: CurrentUser, session: SessionDep, page: PageDep, scope: str | None = None
) -> MemoryList:
    """The active memories, oldest first, a page at a time."""
    if scope is not None and scope not in views.SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(views.SCOPES)}")
    return await memory.memories(session, user.id, scope, page)


@router.get("/profile", response_model_exclude_unset=True)
async def get_profile(user: CurrentUser, session: SessionDep) -> Profile:
    return Profile.model_validate(await views.profile(session, user.id))


@router.get("/{memory_id}/history", response_model_exclude_unset=True)
async def get_history(
    memory_id: str, user: CurrentUser, session: SessionDep, page: PageDep
) -> MemoryHistory:
    """The version chain, oldest first, a page at a time."""
    return await memory.history(session, user.id, memory_id, page)


@router.post("/forget", status_code=202)
async def forget(body: ForgetIn, user: CurrentUser, session: SessionDep) -> CardRef:
    """Forgetting waits for the person's confirmation: the card that asks."""
    card = await request_forget_card(session, user.id, body.memory_id, body.text)
    return CardRef(card_id=card.id)


@router.post("/{memory_id}/correct", response_model_exclude_unset=True)
async def correct(
    memory_id: str,
    body: CorrectIn,
    user: CurrentUser,
    db: DbDep,
    settings: SettingsDep,
    temporal: TemporalDep,
) -> MemoryHistory:
    """The person's correction becomes a new, stated version; the memory's history after."""
    return await memory.correct(db, temporal, settings, user.id, memory_id, body.content)

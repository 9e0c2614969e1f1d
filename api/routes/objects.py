"""Workspace objects: documents, flows and assets, their versions and bytes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from api.deps import AssetsDep, CurrentUser, PageDep, SessionDep, SettingsDep
from api.schemas.common import MAX_DB_INT, CardRef
from api.schemas.objects import (
    EditIn,
    ObjectDiff,
    ObjectIn,
    ObjectList,
    ObjectSummary,
    ObjectView,
    VersionList,
    WriteIn,
    Written,
)
from api.services import objects
from workspace import media
from workspace.media import ALLOWED

router = APIRouter(prefix="/v1/objects", tags=["objects"])
Version = Annotated[int | None, Query(ge=1, le=MAX_DB_INT)]
# An asset is served from the api's own origin: the browser must neither guess its type
# (nosniff) nor run anything in it (a sandbox with no sources), even opened in its own tab.
BLOB_CSP = "sandbox; default-src 'none'; frame-ancestors 'none'"
BYTES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The asset's bytes, with its media type",
        # Each type it may leave as (workspace/media.py); anything else as octet-stream.
        "content": {
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in sorted(ALLOWED | {"application/octet-stream"})
        },
    }
}


@router.get("")
async def list_objects(
    user: CurrentUser, session: SessionDep, page: PageDep, type: str | None = None
) -> ObjectList:
    """The objects not deleted, oldest first, a page at a time."""
    return await objects.list_objects(session, user.id, type, page)


@router.post("", status_code=201)
async def create(
    body: ObjectIn,
    user: CurrentUser,
    session: SessionDep,
    assets: AssetsDep,
    settings: SettingsDep,
) -> ObjectSummary:
    return await objects.create(session, assets, user.id, body, settings.max_upload_bytes)


@router.get("/{object_id}")
async def get(
    object_id: str, user: CurrentUser, session: SessionDep, version: Version = None
) -> ObjectView:
    return await objects.read(session, user.id, object_id, version)


@router.get("/{object_id}/versions")
async def versions(
    object_id: str, user: CurrentUser, session: SessionDep, page: PageDep
) -> VersionList:
    """The versions kept, oldest first, a page at a time: who made each, when, and what
    changed against the previous one."""
    return await objects.versions(session, user.id, object_id, page)


@router.get("/{object_id}/diff")
async def diff(
    object_id: str,
    user: CurrentUser,
    session: SessionDep,
    from_version: Annotated[int | None, Query(alias="from", ge=1, le=MAX_DB_INT)] = None,
    to: Version = None,
) -> ObjectDiff:
    """The lines changed from version `from` (default: the one before `to`) to version
    `to` (default: the current one), in hunks with a few unchanged lines around each: a
    document's text, or a flow's nodes as JSON. Restoring `from` is a PUT of its content
    on the current version."""
    return await objects.compare(session, user.id, object_id, from_version, to)


@router.put("/{object_id}", response_model_exclude_unset=True)
async def put(
    object_id: str,
    body: WriteIn,
    user: CurrentUser,
    session: SessionDep,
    assets: AssetsDep,
    settings: SettingsDep,
) -> Written:
    return await objects.write(session, assets, user.id, object_id, body, settings.max_upload_bytes)


@router.patch("/{object_id}", response_model_exclude_unset=True)
async def patch(object_id: str, body: EditIn, user: CurrentUser, session: SessionDep) -> Written:
    return await objects.edit(session, user.id, object_id, body)


@router.delete("/{object_id}", status_code=202)
async def delete(object_id: str, user: CurrentUser, session: SessionDep) -> CardRef:
    """Deletion is irreversible: it happens only when the person confirms the card."""
    return await objects.ask_to_delete(session, user.id, object_id)


@router.get("/{object_id}/blob", response_class=Response, responses=BYTES)
async def blob(
    object_id: str,
    user: CurrentUser,
    session: SessionDep,
    assets: AssetsDep,
    version: Version = None,
) -> Response:
    data, media_type = await objects.blob(session, assets, user.id, object_id, version)
    return Response(data, media_type=_served_type(media_type), headers=blob_headers(media_type))


def _served_type(media_type: str | None) -> str:
    """A type stored before the list existed (or by an upstream) leaves as plain bytes."""
    if media_type and media.allowed(media_type):
        return media.base_type(media_type)
    return "application/octet-stream"


def blob_headers(media_type: str | None) -> dict[str, str]:
    inline = media_type is not None and media.base_type(media_type) in media.INLINE
    return {
        "X-Content-Type-Options": "nosniff",
        "Content-Disposition": "inline" if inline else "attachment",
        "Content-Security-Policy": BLOB_CSP,
        "Cross-Origin-Resource-Policy": "same-origin",
    }

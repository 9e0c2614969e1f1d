"""The agent's workspace tools: list, read, create, write, edit, delete.

Every writing tool is keyed by the call's `call_id`, stored on the version it makes: a
retried call finds its version and answers as the first attempt did, applying nothing
twice. A refused write answers `error` with the current version, who changed it and what
changed, and tells the model to re-read. Reading records the version the task has seen,
which is what change notices and the full-write check compare against.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from llm.types import ToolSpec
from lomo.db.models import TaskObject, WorkObject
from lomo.errors import Conflict, InvalidInput, NotFound
from lomo.events import append_event
from lomo.states import EventType
from tools.base import Tool, ToolCallContext, ToolDeps, ToolResult, error
from workspace import store, writes
from workspace.cards import request_delete
from workspace.edits import parse_edits
from workspace.errors import Deleted

READ_CHARS = 16_000  # a document page; longer ones are read on demand with `offset`
READ_NODES = 40  # a larger flow is shown as an overview unless nodes are named
REREAD = "Re-read it with read_object, then apply your change to the current version."

_ID = {"type": "string", "description": "the object's id (obj_…)"}
_BASE = {"type": "integer", "description": "the version your change is based on (from read)"}


def _spec(name: str, description: str, props: dict[str, Any], required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": props, "required": required},
    )


def _refused(e: Conflict | InvalidInput | NotFound) -> ToolResult:
    if isinstance(e, Deleted):
        return error(e.detail, deleted=True, **e.extra)
    hint = f" {REREAD}" if isinstance(e, Conflict) else ""
    return error(f"{e.detail}.{hint}" if hint else e.detail, code=e.code, **e.extra)


def _done(w: writes.Written) -> ToolResult:
    out = w.view()
    if w.replayed:
        out["note"] = "this call had already been applied; nothing was applied twice"
    return ToolResult("done", out, made_progress=not w.replayed, artifacts=[w.object_id])


class _WorkspaceTool(Tool):
    def __init__(self, deps: ToolDeps) -> None:
        self.deps = deps

    def author(self, ctx: ToolCallContext) -> str:
        return store.task_author(ctx.task_id, ctx.call_id)


class _VersionedWrite(_WorkspaceTool):
    """A tool that makes one version in one transaction: a refusal (conflict, unknown or
    deleted object, bad input) is the model's to handle, so it answers `error`."""

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        try:
            async with self.deps.db.session() as s:
                written = await self.write(s, ctx, args)
        except (Conflict, NotFound, InvalidInput) as e:
            return _refused(e)
        return written if isinstance(written, ToolResult) else _done(written)

    async def write(
        self, s: AsyncSession, ctx: ToolCallContext, args: dict[str, Any]
    ) -> writes.Written | ToolResult:
        raise NotImplementedError


class ListObjects(_WorkspaceTool):
    spec = _spec(
        "list_objects",
        "List the person's workspace objects (documents, flows, assets) with id and version.",
        {"type": {"type": "string", "enum": ["document", "flow", "asset"]}},
        [],
    )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        async with self.deps.db.session() as s:
            q = select(WorkObject).where(
                WorkObject.user_id == ctx.user_id, WorkObject.deleted.is_(False)
            )
            if args.get("type"):
                q = q.where(WorkObject.type == str(args["type"]))
            rows = list(await s.scalars(q.order_by(WorkObject.created_at.desc()).limit(50)))
        return ToolResult(
            "done",
            {
                "objects": [
                    {"object_id": o.id, "type": o.type, "name": o.name, "version": o.version}
                    for o in rows
                ]
            },
        )


class ReadObject(_WorkspaceTool):
    spec = _spec(
        "read_object",
        "Read a workspace object (current version unless `version`). Long documents come in "
        "pages (`offset`); large flows as an overview unless you name `nodes`.",
        {
            "object_id": _ID,
            "version": {"type": "integer"},
            "offset": {"type": "integer", "description": "documents: character offset"},
            "nodes": {"type": "array", "items": {"type": "string"}},
        },
        ["object_id"],
    )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        oid = str(args.get("object_id", ""))
        try:
            async with self.deps.db.session() as s:
                gone: Deleted | None = None
                try:
                    obj, ver = await store.get_version(s, ctx.user_id, oid, args.get("version"))
                except Deleted as e:
                    link = await s.get(TaskObject, (ctx.task_id, oid))
                    if link is not None:  # told now: the deletion notice has done its job
                        link.deletion_seen = True
                    gone = e
                if gone is not None:
                    return _refused(gone)
                await store.link_task(s, ctx.task_id, obj.id, seen_version=ver.version)
                out = {
                    "object_id": obj.id,
                    "type": obj.type,
                    "name": obj.name,
                    "version": ver.version,
                    "current_version": obj.version,
                    "created_by": ver.created_by,
                    **_shown(obj.type, ver.content, args),
                }
        except (NotFound, InvalidInput) as e:
            return _refused(e)
        return ToolResult("done", out)


def _shown(type_: str, content: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The content, or the part of it that fits (the rest is read on demand)."""
    if type_ == "document":
        text = str(content.get("text", ""))
        off = max(0, int(args.get("offset") or 0))
        page = text[off : off + READ_CHARS]
        out: dict[str, Any] = {"text": page}
        if off or off + READ_CHARS < len(text):
            out["page"] = {"offset": off, "total_chars": len(text)}
            if off + READ_CHARS < len(text):
                out["page"]["next_offset"] = off + READ_CHARS
        return out
    if type_ == "flow":
        nodes: dict[str, Any] = content.get("nodes") or {}
        wanted = args.get("nodes")
        if wanted:
            return {"nodes": {n: nodes[n] for n in wanted if n in nodes}}
        if len(nodes) > READ_NODES:
            return {
                "overview": {n: v.get("type") for n, v in nodes.items()},
                "note": f"{len(nodes)} nodes: name the ones you need in `nodes` to read them",
            }
        return {"nodes": nodes}
    return {"content": content}


class CreateObject(_WorkspaceTool):
    """create_document / create_flow. One object per name and task: asking again for the
    same name answers with the existing object (no silent second storyboard)."""

    def __init__(self, deps: ToolDeps, type_: str) -> None:
        super().__init__(deps)
        self.type = type_
        if type_ == "document":
            self.domain = "documents"
            self.spec = _spec(
                "create_document",
                "Create a text document (e.g. a storyboard) in the shared workspace.",
                {"name": {"type": "string"}, "text": {"type": "string"}},
                ["name", "text"],
            )
        else:
            self.domain = "flows"
            self.spec = _spec(
                "create_flow",
                "Create a flow: nodes {node_id: {type, params, inputs: [node_id]}}.",
                {"name": {"type": "string"}, "nodes": {"type": "object"}},
                ["name", "nodes"],
            )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        name = str(args.get("name") or "").strip()
        if not name:
            return error("name must not be empty")
        content = (
            {"text": args.get("text")} if self.type == "document" else {"nodes": args.get("nodes")}
        )
        try:
            async with self.deps.db.session() as s:
                done = await store.version_by_call(s, ctx.call_id)
                if done is not None:  # this very call created it before a crash: same answer
                    obj = await store.get_object(s, ctx.user_id, done.object_id)
                    return ToolResult(
                        "done",
                        {
                            "object_id": obj.id,
                            "type": obj.type,
                            "name": obj.name,
                            "version": 1,
                            "note": "this call had already been applied; nothing was applied twice",
                        },
                        artifacts=[obj.id],
                    )
                existing = await _same_name(s, ctx.task_id, self.type, name)
                if existing is not None:
                    link = await store.link_task(s, ctx.task_id, existing.id)
                    return ToolResult(
                        "done",
                        {
                            "object_id": existing.id,
                            "type": existing.type,
                            "name": existing.name,
                            "version": existing.version,
                            "existing": True,
                            "note": f"this task already has {self.type} “{name}” (you last "
                            f"read v{link.seen_version}); read it and edit it instead of "
                            "creating another",
                        },
                        artifacts=[existing.id],
                    )
                obj = await store.create_object(
                    s,
                    ctx.user_id,
                    self.type,
                    name,
                    content,
                    self.author(ctx),
                    task_id=ctx.task_id,
                    call_id=ctx.call_id,
                )
                await _created_event(s, ctx, obj)
        except InvalidInput as e:
            return _refused(e)
        return ToolResult(
            "done",
            {"object_id": obj.id, "type": obj.type, "name": obj.name, "version": 1},
            made_progress=True,
            artifacts=[obj.id],
        )


async def _same_name(s: Any, task_id: str, type_: str, name: str) -> WorkObject | None:
    found: WorkObject | None = await s.scalar(
        select(WorkObject)
        .join(TaskObject, TaskObject.object_id == WorkObject.id)
        .where(TaskObject.task_id == task_id, WorkObject.type == type_)
        .where(WorkObject.name == name, WorkObject.deleted.is_(False))
    )
    return found


async def _created_event(s: Any, ctx: ToolCallContext, obj: WorkObject) -> None:
    await append_event(
        s,
        ctx.user_id,
        EventType.OBJECT_VERSION,
        {
            "object_id": obj.id,
            "type": obj.type,
            "name": obj.name,
            "version": 1,
            "created_by": store.task_author(ctx.task_id, ctx.call_id),
            "task_id": ctx.task_id,
        },
    )


class WriteObject(_VersionedWrite):
    domain = "documents"
    idempotent = True  # keyed by call_id on the version it makes
    spec = _spec(
        "write_object",
        "Replace a document's text or a flow's nodes completely. Refused if the object "
        "changed since `base_version` or if you have not read that version.",
        {
            "object_id": _ID,
            "base_version": _BASE,
            "text": {"type": "string", "description": "documents"},
            "nodes": {"type": "object", "description": "flows"},
        },
        ["object_id", "base_version"],
    )

    async def write(
        self, s: AsyncSession, ctx: ToolCallContext, args: dict[str, Any]
    ) -> writes.Written | ToolResult:
        oid, base = str(args.get("object_id", "")), int(args.get("base_version") or 0)
        if await store.version_by_call(s, ctx.call_id) is None:
            link = await s.get(TaskObject, (ctx.task_id, oid))
            seen = link.seen_version if link else 0
            if seen < base:  # never overwrite what this task has not read
                return error(
                    f"you have not read version {base} of {oid} (last read: v{seen}). " + REREAD,
                    current_version=None,
                )
        obj = await store.get_live(s, ctx.user_id, oid)
        content = (
            {"text": args.get("text")} if obj.type == "document" else {"nodes": args.get("nodes")}
        )
        return await writes.write_object(
            s,
            ctx.user_id,
            oid,
            base,
            content,
            self.author(ctx),
            call_id=ctx.call_id,
            task_id=ctx.task_id,
        )


class EditDocument(_VersionedWrite):
    domain = "documents"
    spec = _spec(
        "edit_document",
        "Replace exact snippets of a document. Each `old` must occur exactly once in the "
        "current text; if any does not, nothing is applied.",
        {
            "object_id": _ID,
            "base_version": _BASE,
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
                    "required": ["old", "new"],
                },
            },
        },
        ["object_id", "edits"],
    )

    async def write(
        self, s: AsyncSession, ctx: ToolCallContext, args: dict[str, Any]
    ) -> writes.Written | ToolResult:
        base = args.get("base_version")
        return await writes.edit_document(
            s,
            ctx.user_id,
            str(args.get("object_id", "")),
            parse_edits(args.get("edits") or []),
            self.author(ctx),
            int(base) if base is not None else None,
            call_id=ctx.call_id,
            task_id=ctx.task_id,
        )


class EditFlow(_VersionedWrite):
    domain = "flows"
    spec = _spec(
        "edit_flow",
        "Change nodes of a flow: {node_id: node} sets, {node_id: null} removes. Refused only "
        "for nodes someone else changed since `base_version`; other changes are kept.",
        {"object_id": _ID, "base_version": _BASE, "nodes": {"type": "object"}},
        ["object_id", "base_version", "nodes"],
    )

    async def write(
        self, s: AsyncSession, ctx: ToolCallContext, args: dict[str, Any]
    ) -> writes.Written | ToolResult:
        nodes = args.get("nodes")
        if not isinstance(nodes, dict):
            return error("nodes must be an object {node_id: node or null}")
        return await writes.edit_flow(
            s,
            ctx.user_id,
            str(args.get("object_id", "")),
            int(args.get("base_version") or 0),
            nodes,
            self.author(ctx),
            call_id=ctx.call_id,
            task_id=ctx.task_id,
        )


class DeleteObject(_WorkspaceTool):
    spec = _spec(
        "delete_object",
        "Ask the person to delete an object for good (a confirmation card; nothing is "
        "deleted unless the person confirms).",
        {"object_id": _ID},
        ["object_id"],
    )

    async def run(self, ctx: ToolCallContext, args: dict[str, Any]) -> ToolResult:
        try:
            async with self.deps.db.session() as s:
                card = await request_delete(
                    s, ctx.user_id, str(args.get("object_id", "")), ctx.task_id, ctx.call_id
                )
        except (NotFound, InvalidInput) as e:
            return _refused(e)
        return ToolResult(
            "needs_confirmation",
            {"status": "waiting_for_person", "card_id": card.id},
            card_id=card.id,
        )


def workspace_tools(deps: ToolDeps) -> list[Tool]:
    return [
        ListObjects(deps),
        ReadObject(deps),
        CreateObject(deps, "document"),
        CreateObject(deps, "flow"),
        WriteObject(deps),
        EditDocument(deps),
        EditFlow(deps),
        DeleteObject(deps),
    ]

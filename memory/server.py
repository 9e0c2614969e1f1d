"""The memory service's HTTP app (`lomo memory`): the one owner of the vector index and of
the memory writes (docs/architecture.md#the-memory-service).

Two groups of routes: the memory jobs the worker's activities hand over (`/v1/extract`,
`/v1/forget`, `/v1/correct`; 422 when no retry can help) and the vector index's narrow
contract (`/v1/vectors/{collection}/...`, vectors/remote.py is its client), which the
context builder's retrieval and the routing task index use.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from memory.services import MemoryServices
from memory.types import CorrectInput, ExtractInput, ForgetInput
from memory.writes import MemoryWrites, Refused
from vectors import VectorIndexError, VectorPoint
from vectors.base import NoCollection

Scalar = str | int | bool
Filter = dict[str, Scalar | list[str] | list[int]]


class Health(BaseModel):
    service: Literal["lomo-memory"]
    ready: bool
    backend: str = Field(description="the vector engine this process owns")


class ExtractBody(BaseModel):
    user_id: str
    message_id: str


class ExtractResult(BaseModel):
    evidence_id: str
    stored: int
    dropped: int
    skipped: str | None = None


class ForgetBody(BaseModel):
    user_id: str
    card_id: str


class ForgetResult(BaseModel):
    evidence_ids: list[str]
    deleted_version_ids: list[str]
    profile_version: int | None


class CorrectBody(BaseModel):
    user_id: str
    evidence_id: str


class CorrectResult(BaseModel):
    memory_id: str
    version_id: str
    version: int


class EnsureBody(BaseModel):
    dim: int = Field(gt=0)
    keyword_fields: list[str] = []


class PointBody(BaseModel):
    id: str
    vector: list[float]
    payload: dict[str, Any] = {}


class UpsertBody(BaseModel):
    points: list[PointBody]


class SearchBody(BaseModel):
    vector: list[float]
    limit: int = Field(gt=0, le=1000)
    filter: Filter | None = None
    exact: bool = False


class HitResult(BaseModel):
    id: str
    score: float
    payload: dict[str, Any]


class SearchResult(BaseModel):
    hits: list[HitResult]


class DeleteBody(BaseModel):
    ids: list[str]


class FilterBody(BaseModel):
    filter: Filter | None = None


class CountResult(BaseModel):
    count: int


class Done(BaseModel):
    ok: Literal[True] = True


def create_memory_app(writes: MemoryWrites, backend: str) -> FastAPI:
    app = FastAPI(title="Lomo memory service", version="1")

    @app.exception_handler(Refused)
    async def refused(_: Request, e: Refused) -> JSONResponse:
        return JSONResponse({"detail": str(e)}, status_code=422)

    @app.exception_handler(VectorIndexError)
    async def index_refused(_: Request, e: VectorIndexError) -> JSONResponse:
        # 409: a collection not opened since this process started; the client opens it.
        status = 409 if isinstance(e, NoCollection) else 422
        return JSONResponse({"detail": str(e)}, status_code=status)

    @app.get("/healthz", response_model=Health)
    async def healthz() -> Health:
        return Health(service="lomo-memory", ready=True, backend=backend)

    @app.post("/v1/extract", response_model=ExtractResult)
    async def extract(body: ExtractBody) -> ExtractResult:
        out = await writes.extract(ExtractInput(body.user_id, body.message_id))
        return ExtractResult(**vars(out))

    @app.post("/v1/forget", response_model=ForgetResult)
    async def forget(body: ForgetBody) -> ForgetResult:
        out = await writes.forget(ForgetInput(body.user_id, body.card_id))
        return ForgetResult(**vars(out))

    @app.post("/v1/correct", response_model=CorrectResult)
    async def correct(body: CorrectBody) -> CorrectResult:
        out = await writes.correct(CorrectInput(body.user_id, body.evidence_id))
        return CorrectResult(**vars(out))

    _vector_routes(app, writes.services)
    return app


def _vector_routes(app: FastAPI, services: MemoryServices) -> None:
    index = services.index

    async def done(op: Awaitable[Any]) -> Done:
        await op
        return Done()

    @app.post("/v1/vectors/{name}/ensure", response_model=Done)
    async def ensure(name: str, body: EnsureBody) -> Done:
        return await done(index.ensure_collection(name, body.dim, body.keyword_fields))

    @app.post("/v1/vectors/{name}/upsert", response_model=Done)
    async def upsert(name: str, body: UpsertBody) -> Done:
        points = [VectorPoint(p.id, p.vector, p.payload) for p in body.points]
        return await done(index.upsert(name, points))

    @app.post("/v1/vectors/{name}/search", response_model=SearchResult)
    async def search(name: str, body: SearchBody) -> SearchResult:
        hits = await index.search(name, body.vector, body.limit, body.filter, body.exact)
        return SearchResult(
            hits=[HitResult(id=h.id, score=h.score, payload=h.payload) for h in hits]
        )

    @app.post("/v1/vectors/{name}/delete", response_model=Done)
    async def delete(name: str, body: DeleteBody) -> Done:
        return await done(index.delete(name, body.ids))

    @app.post("/v1/vectors/{name}/delete_where", response_model=Done)
    async def delete_where(name: str, body: FilterBody) -> Done:
        if not body.filter:
            raise VectorIndexError("delete_where needs a filter")
        return await done(index.delete_where(name, body.filter))

    @app.post("/v1/vectors/{name}/count", response_model=CountResult)
    async def count(name: str, body: FilterBody) -> CountResult:
        return CountResult(count=await index.count(name, body.filter))

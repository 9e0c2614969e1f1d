"""Optimistic concurrency of full writes, on SQLite and Postgres."""

from __future__ import annotations

import asyncio

import pytest

from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.errors import Conflict
from workspace import store


async def test_racing_writers_on_one_base_exactly_one_wins(db: Database) -> None:
    async with db.session() as s:
        user, _ = await create_user(s, "w")
        obj = await store.create_object(s, user.id, "document", "doc", {"text": "v1"}, "user")

    async def write(i: int) -> str:
        try:
            async with db.session() as s:
                await store.write_object(s, user.id, obj.id, 1, {"text": f"w{i}"}, f"writer{i}")
            return "ok"
        except Conflict as e:
            assert e.extra["current_version"] >= 2
            return "conflict"

    results = await asyncio.gather(*(write(i) for i in range(10)))
    assert results.count("ok") == 1 and results.count("conflict") == 9
    async with db.session() as s:
        o, v = await store.get_version(s, user.id, obj.id)
        assert o.version == 2 and v.content["text"].startswith("w")
        with pytest.raises(Conflict):
            await store.write_object(s, user.id, obj.id, 1, {"text": "late"}, "user")

"""Migrations, auth and the event log on SQLite and Postgres."""

from __future__ import annotations

import asyncio

import pytest

from lomo.auth import create_user, hash_token, user_for_token
from lomo.db.engine import Database
from lomo.errors import Unauthorized
from lomo.events import append_event, events_after


async def test_tokens_are_stored_hashed(db: Database) -> None:
    async with db.session() as s:
        user, token = await create_user(s, "ada")
        assert user.token_hash == hash_token(token) != token
    async with db.session() as s:
        assert (await user_for_token(s, token)).id == user.id
        with pytest.raises(Unauthorized):
            await user_for_token(s, token + "x")


async def test_event_sequence_is_gap_free_under_concurrency(db: Database) -> None:
    async with db.session() as s:
        user, _ = await create_user(s, "bo")

    async def one(i: int) -> int:
        async with db.session() as s:
            return await append_event(s, user.id, "test", {"i": i})

    seqs = await asyncio.gather(*(one(i) for i in range(25)))
    assert sorted(seqs) == list(range(1, 26))
    async with db.session() as s:
        rows = await events_after(s, user.id, 10)
        assert [e.seq for e in rows] == list(range(11, 26))


async def test_failed_transaction_leaves_no_event(db: Database) -> None:
    async with db.session() as s:
        user, _ = await create_user(s, "cy")
    with pytest.raises(RuntimeError):
        async with db.session() as s:
            await append_event(s, user.id, "test", {})
            raise RuntimeError("boom")
    async with db.session() as s:
        assert await events_after(s, user.id, 0) == []
        assert await append_event(s, user.id, "test", {}) == 1

"""The event bell: a commit that appended a person's event wakes that person's streams in
this process at once (api/services/events.py waits on it between polls); a rollback does not."""

from __future__ import annotations

import asyncio

import pytest

from lomo.auth import create_user
from lomo.db.engine import Database
from lomo.events import BELL, append_event


async def test_commit_rings_only_that_persons_waiters(db: Database) -> None:
    async with db.session() as s:
        alice, _ = await create_user(s, "alice")
        bob, _ = await create_user(s, "bob")
    mine, theirs = BELL.waiter(alice.id), BELL.waiter(bob.id)
    try:
        async with db.session() as s:
            await append_event(s, alice.id, "test.one", {})
            await append_event(s, alice.id, "test.two", {})
            await asyncio.sleep(0)
            assert not mine.is_set()  # not before the commit: a stream would read nothing
        await asyncio.sleep(0)  # the ring is scheduled on the waiter's loop
        assert mine.is_set()
        assert not theirs.is_set()
    finally:
        BELL.forget(alice.id, mine)
        BELL.forget(bob.id, theirs)


async def test_rollback_rings_nothing(db: Database) -> None:
    async with db.session() as s:
        alice, _ = await create_user(s, "alice")
    waiter = BELL.waiter(alice.id)
    try:
        with pytest.raises(RuntimeError):
            async with db.session() as s:
                await append_event(s, alice.id, "test.lost", {})
                raise RuntimeError("abort")
        await asyncio.sleep(0)
        assert not waiter.is_set()
    finally:
        BELL.forget(alice.id, waiter)

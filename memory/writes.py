"""The memory writes: extraction after a message, the forget cascade, a person's
correction. Each writes SQL in one transaction and then makes the vector index match
(idempotent, so a retry repairs a crash between the two).

They run where the vector index is owned: in the memory service (`lomo memory`,
memory/server.py) when one runs, else in the worker's memory activities.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from cards.store import confirmed
from llm.types import ModelProvider
from lomo import clock
from lomo.db.engine import Database
from lomo.db.models import Card
from lomo.errors import InvalidInput, ModelOutputError, NotFound
from lomo.settings import Settings
from lomo.states import CardKind, CardStatus
from memory.candidates import Candidate
from memory.chains import Touched, apply_candidate
from memory.episodes import write_episodes
from memory.extraction import extract_message, finish
from memory.forget import forget
from memory.models import Evidence, ForgetRecord, Memory, MemoryVersion
from memory.services import MemoryServices, sources_of
from memory.text import key_part
from memory.types import (
    CorrectInput,
    CorrectOutput,
    ExtractInput,
    ExtractOutput,
    ForgetInput,
    ForgetOutput,
)


class Refused(Exception):
    """Input no retry will change (no such card, not confirmed, bad model output)."""


class MemoryWrites:
    def __init__(
        self, db: Database, settings: Settings, provider: ModelProvider, services: MemoryServices
    ) -> None:
        self.db = db
        self.settings = settings
        self.provider = provider
        self.services = services

    async def extract(self, inp: ExtractInput) -> ExtractOutput:
        # A confirmed forget whose signal was lost runs first: nothing the person asked to
        # forget may be extracted again because a wake-up went missing.
        for card_id in await self._unexecuted_forgets(inp.user_id):
            await self.forget(ForgetInput(inp.user_id, card_id))
        try:
            res = await extract_message(
                self.db,
                self.provider,
                inp.user_id,
                inp.message_id,
                self.settings.memory_profile_items,
            )
        except (ModelOutputError, NotFound) as e:
            raise Refused(str(e)) from e
        await self.services.sync_versions(self.db, res.version_ids)
        await self.services.sync_evidence(self.db, [res.evidence_id])
        # The task summaries it touched are drafts until the model rewrote them.
        await write_episodes(self.db, self.provider, inp.user_id)
        stored = sum(1 for o in res.outcomes if o.get("outcome") not in (None, "dropped"))
        dropped = sum(1 for o in res.outcomes if o.get("outcome") == "dropped")
        return ExtractOutput(res.evidence_id, stored, dropped, res.skipped)

    async def _unexecuted_forgets(self, user_id: str) -> list[str]:
        async with self.db.session() as s:
            done = select(ForgetRecord.id).where(ForgetRecord.user_id == user_id)
            cards = await s.scalars(
                select(Card)
                .where(
                    Card.user_id == user_id,
                    Card.kind == CardKind.FORGET,
                    Card.status == CardStatus.ANSWERED,
                    Card.id.not_in(done),
                )
                .order_by(Card.answered_at)
            )
            return [c.id for c in cards if confirmed(c)]

    async def forget(self, inp: ForgetInput) -> ForgetOutput:
        async with self.db.session() as s:
            card = await s.get(Card, inp.card_id)
            if card is None or card.user_id != inp.user_id or card.kind != CardKind.FORGET:
                raise Refused(f"no forget card {inp.card_id}")
            if not confirmed(card):
                # Only the person's confirmation authorizes forgetting, never a caller's claim.
                raise Refused(f"card {inp.card_id} is not confirmed")
            payload: dict[str, Any] = card.payload or {}
            try:
                res = await forget(
                    s,
                    inp.user_id,
                    card.id,
                    payload.get("memory_id"),
                    payload.get("text"),
                    self.settings.memory_profile_items,
                )
            except (NotFound, InvalidInput) as e:
                raise Refused(str(e)) from e
        await self.services.sync_versions(self.db, res.version_ids_to_sync)
        await self.services.delete_memories(res.deleted_memory_ids)
        async with self.db.session() as s:
            # Words that built on the forgotten ones leave the index with them.
            built_on = await sources_of(s, res.deleted_version_ids)
        await self.services.sync_evidence(self.db, [*res.evidence_ids, *built_on])
        await write_episodes(self.db, self.provider, inp.user_id)
        return ForgetOutput(res.evidence_ids, res.deleted_version_ids, res.profile_version)

    async def correct(self, inp: CorrectInput) -> CorrectOutput:
        """The person's own words replace the current version: a new, stated version."""
        now = clock.now()
        async with self.db.session() as s:
            ev = await s.get(Evidence, inp.evidence_id)
            if ev is None or ev.user_id != inp.user_id or ev.source != "correction":
                raise Refused(f"no correction {inp.evidence_id}")
            memory = await s.get(Memory, ev.source_ref.split(":", 1)[0])
            if memory is None or memory.status != "active":
                raise Refused("the memory is gone")
            if ev.extracted_at is None:
                touched = Touched()
                cand = Candidate(
                    content=ev.text,
                    kind="stated",  # the person said it: a correction is always stated
                    scope=memory.scope,
                    subject=key_part(memory.subject),
                    attribute=key_part(memory.attribute),
                    value=ev.text,
                    operation="change",
                    quote=ev.text,
                    explicit=True,
                )
                memory.kind = "stated"
                applied = await apply_candidate(s, ev, cand, now, touched, correction_of=memory)
                ev.extracted_at = now
                ev.candidates = [{"candidate": cand.to_dict(), "outcome": applied.outcome}]
                await finish(
                    s,
                    inp.user_id,
                    touched,
                    self.settings.memory_profile_items,
                    "correction",
                    now,
                    {"evidence_id": ev.id, "memory_ids": [memory.id]},
                )
            version = await s.scalar(
                select(MemoryVersion).where(
                    MemoryVersion.memory_id == memory.id,
                    MemoryVersion.version == memory.current_version,
                )
            )
            assert version is not None
            previous = await s.scalars(
                select(MemoryVersion.id).where(MemoryVersion.memory_id == memory.id)
            )
            sync = list(previous)
            # The words behind the corrected versions are wrong by the person's own word:
            # they leave the evidence index (recall's SQL check withholds them too).
            corrected = [e for e in await sources_of(s, sync) if e != ev.id]
        await self.services.sync_versions(self.db, sync)
        await self.services.sync_evidence(self.db, corrected)
        return CorrectOutput(memory.id, version.id, version.version)

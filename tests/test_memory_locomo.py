"""The LoCoMo benchmark's parts on a small conversation made here in LoCoMo's shape: the
loader, the recall mapping, date resolution, the latest-version rule, the forgetting check.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from bench.memory_locomo import (
    Conversation,
    Person,
    Run,
    ask,
    feed,
    forgetting_check,
    load,
    open_person,
    recall_at,
)
from memory.dates import dated, resolve
from memory.models import MemoryVersion
from vectors.embeddings import FakeEmbedder

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday

CONVERSATION = {
    "speaker_a": "Ana",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben! Our brand's main colour is red."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Red suits a bakery. How was your week?"},
        {
            "speaker": "Ana",
            "dia_id": "D1:3",
            "text": "I went to a pottery class yesterday and made a bowl.",
        },
        {"speaker": "Ben", "dia_id": "D1:4", "text": "A bowl! What glaze did you use on it?"},
        {"speaker": "Ana", "dia_id": "D1:5", "text": "A deep turquoise glaze, my favourite."},
    ],
    "session_2_date_time": "10:00 am on 20 June, 2023",
    "session_2": [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "Any news about the bakery since May?"},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "Our brand's main colour is now blue."},
        {
            "speaker": "Ana",
            "dia_id": "D2:3",
            "text": "Also I adopted a cat named Miso last week.",
            "img_url": ["https://example.invalid/miso.jpg"],
            "blip_caption": "a photo of a grey cat on a sofa",
        },
    ],
    "qa": [
        {"question": "When did Ana go to the pottery class?", "answer": "7 May 2023",
         "evidence": ["D1:3"], "category": 2},
        {"question": "What glaze did Ana use on her bowl?", "answer": "turquoise",
         "evidence": ["D1:4", "D1:5"], "category": 4},
        {"question": "What is the main colour of Ana's brand?", "answer": "blue",
         "evidence": ["D2:2"], "category": 4},
        {"question": "What is the name of Ana's dog?", "evidence": ["D2:3"], "category": 5,
         "adversarial_answer": "Miso"},
    ],
}  # fmt: skip


@pytest.fixture
def conversation(tmp_path: Path) -> Conversation:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "c1.json").write_text(json.dumps(CONVERSATION))
    [conv] = load(tmp_path / "data")
    return conv


@pytest.fixture
async def person(tmp_path: Path, conversation: Conversation) -> AsyncIterator[Person]:
    root = tmp_path / "person"
    root.mkdir()
    p = await open_person(root, FakeEmbedder(64), "offline")
    await feed(p, conversation)
    yield p
    await p.deps.http.aclose()
    await p.services.index.close()
    await p.db.dispose()


def test_the_loader_reads_turns_with_their_session_dates_and_questions(
    conversation: Conversation,
) -> None:
    turns = conversation.turns
    ids = [t.dia_id for t in turns]
    assert ids == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D2:1", "D2:2", "D2:3"]
    assert turns[0].at == SAID and turns[1].at > turns[0].at  # in order within the session
    assert turns[5].at.date().isoformat() == "2023-06-20"
    assert turns[2].message.startswith("Ana: I went to a pottery class")
    assert "[shares a photo: a photo of a grey cat on a sofa]" in turns[7].message
    assert [q.category for q in conversation.questions] == [2, 4, 4, 5]
    assert conversation.questions[1].evidence == ["D1:4", "D1:5"]


def test_relative_dates_resolve_against_the_day_they_were_said() -> None:
    assert resolve("I went there yesterday.", SAID) == ["7 May 2023"]
    assert resolve("We met last week, two days ago and last Friday", SAID) == [
        "the week of 1 May 2023",
        "6 May 2023",
        "5 May 2023",
    ]
    assert resolve("Three months ago, and next month", SAID) == ["February 2023", "June 2023"]
    assert resolve("nothing relative here", SAID) == []
    assert dated("I went there yesterday.", SAID) == (
        "I went there yesterday. (said on 8 May 2023; refers to 7 May 2023)"
    )


def test_recall_at_counts_evidence_turns_among_the_first_k_items() -> None:
    ranked = [["D1:1"], ["D1:4", "D1:5"], ["D2:2"]]
    assert recall_at(["D1:5", "D2:2"], ranked, 2) == 0.5
    assert recall_at(["D1:5", "D2:2"], ranked, 3) == 1.0


async def test_recall_maps_what_it_returns_to_the_source_turns(person: Person) -> None:
    ranked, took, degraded = await ask(person, "What glaze did Ana use on her bowl?")
    assert not degraded and took > 0
    top = {d for sources in ranked[:3] for d in sources}
    assert {"D1:4", "D1:5"} <= top


async def test_a_question_about_a_date_finds_the_turn_that_said_yesterday(
    person: Person,
) -> None:
    ranked, _, _ = await ask(person, "What did Ana do on 7 May 2023?")
    assert ranked[0] == ["D1:3"]


async def test_a_changed_fact_comes_in_its_latest_version_with_the_old_as_history(
    person: Person,
) -> None:
    from memory.context import memory_for_context

    ctx = await memory_for_context(person.deps, person.user_id, "tsk_x", "brand main colour")
    lines = ctx.items
    # A brand fact is in the profile, which every step shows first; else it leads the items.
    assert "The brand's main colour is blue." in ctx.profile_text
    assert "red" not in ctx.profile_text
    assert not any(line.startswith("The brand's main colour is red") for line in lines)
    red = next(line for line in lines if "colour is red" in line)
    assert "(history: changed since" in red  # the old words, marked as history
    async with person.db.session() as s:  # and the old version kept in the chain, closed
        old = await s.scalar(select(MemoryVersion).where(MemoryVersion.value == "red"))
    assert old is not None and old.status == "superseded" and old.valid_to is not None


async def test_forgotten_turns_never_come_back_through_recall(
    person: Person, conversation: Conversation
) -> None:
    run = Run()
    forgotten = await forgetting_check(person, conversation, 2, run)
    assert forgotten and run.forgotten == len(forgotten)
    assert run.came_back == 0 and run.still_indexed == 0
    for q in conversation.questions:  # every question, not only the sampled ones
        ranked, _, _ = await ask(person, q.text + " pottery class bowl glaze")
        assert not {d for sources in ranked for d in sources} & forgotten

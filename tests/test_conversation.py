"""The main thread remembers the conversation (routing/conversation.py): the offline router
reads the recent turns and work the way a real model would, from the router's request.
Tasks are summarized by what they became (routing/index.py `current_summary`). The
person's language is recognised beyond English and German (routing/text.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from llm.types import TextBlock, ToolUseBlock
from routing.conversation import Conversation, Made, Said
from routing.index import Candidate, current_summary
from routing.prompt import route_request
from routing.text import detect_language
from standin.model import OfflineModel

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
RAW_ID = re.compile(r"\b(?:obj|tsk|ord|crd|chk)_[0-9a-z]+\b")


def _cand(task_id: str, goal: str, minutes: int) -> Candidate:
    return Candidate(
        task_id=task_id,
        kind="lightweight",
        status="completed",
        goal=goal,
        summary="",
        language="en",
        object_refs=[],
        last_active_at=NOW - timedelta(minutes=minutes),
    )


FOX = _cand("tsk_fox00001", "Draw a red fox", 3)
CAT = _cand("tsk_cat00001", "Generate an image of a tabby cat", 2)
TALK = Conversation(
    said=[
        Said("person", "Generate an image of a tabby cat", "tsk_cat00001"),
        Said("lomo", "Here is your image for “tabby cat”.", "tsk_cat00001"),
        Said("person", "Draw a red fox", "tsk_fox00001"),
        Said("lomo", "Here is your image for “red fox”.", "tsk_fox00001"),
    ],
    made=[Made("tsk_fox00001", "image", "red fox", NOW - timedelta(minutes=1))],
)


async def _route(text: str, cands: list[Candidate], talk: Conversation | None) -> dict[str, object]:
    lines = talk.lines(NOW) if talk else []
    req = route_request(text, cands, NOW, "", lines, detect_language(text))
    resp = await OfflineModel().complete(req)
    return dict(next(b for b in resp.content if isinstance(b, ToolUseBlock)).input)


async def test_a_follow_up_that_names_nothing_continues_the_work_it_follows() -> None:
    # Two pieces made minutes apart: by age alone the router cannot tell which one...
    alone = await _route("and one more in blue", [CAT, FOX], None)
    assert alone["decision"] == "clarify", alone
    # ...the conversation says the fox came last.
    routed = await _route("and one more in blue", [CAT, FOX], TALK)
    assert routed == {**routed, "decision": "existing", "task_id": FOX.task_id}, routed
    german = await _route("und noch eins in blau", [CAT, FOX], TALK)
    assert german["task_id"] == FOX.task_id, german


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("what did you just make?", "Lately I made the image “red fox”."),
        ("was hast du gerade gemacht?", "Zuletzt habe ich gemacht: das Bild „red fox“."),
    ],
)
async def test_what_was_just_made_is_answered_from_what_exists(text: str, says: str) -> None:
    routed = await _route(text, [CAT, FOX], TALK)
    assert routed["decision"] == "answer" and routed["answer"] == says, routed
    assert not RAW_ID.search(str(routed["answer"]))


async def test_with_nothing_made_the_answer_says_so_and_what_it_can_do() -> None:
    routed = await _route("what did you just make?", [], Conversation([], []))
    assert str(routed["answer"]).startswith("We haven't made anything yet. I can make images")
    # A capability question is still one, conversation or not.
    asked = await _route("Which video models do you have?", [CAT, FOX], TALK)
    assert "Lately" not in str(asked["answer"]), asked


def test_conversation_lines_bound_and_name_the_work() -> None:
    lines = TALK.lines(NOW)
    assert lines[0] == "- person (task tsk_cat00001): Generate an image of a tabby cat"
    assert lines[-1] == "- made 1m ago: image “red fox” (task tsk_fox00001)"


def test_a_tasks_summary_says_what_it_became() -> None:
    goal = "Make a poster for my bakery"
    latest = ["Turn it into a flyer instead", goal]
    assert current_summary(goal, "", latest) == "latest: Turn it into a flyer instead"
    assert current_summary(goal, "A poster series", []) == "A poster series"
    long = current_summary(goal, "", ["x" * 2000])
    assert len(long) == 600 and long.endswith("…")


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Dessine-moi un renard roux dans la neige, s'il te plaît", "fr"),
        ("Dibuja un zorro rojo en la nieve, por favor", "es"),
        ("Disegna una volpe rossa nella neve, per favore", "it"),
        ("Teken een rode vos in de sneeuw alsjeblieft", "nl"),
        ("Нарисуй рыжую лису на снегу", "ru"),
        ("Zeichne einen roten Fuchs im Schnee", "de"),
        ("Draw a red fox in the snow", "en"),
        ("Hallo!", "de"),
        ("ok", "en"),
        ("and one more in blue", "en"),
    ],
)
def test_the_persons_language_is_recognised(text: str, lang: str) -> None:
    assert detect_language(text) == lang


async def test_a_french_message_gets_an_english_reply_and_the_model_is_told_french() -> None:
    text = "Qu'est-ce que tu peux faire pour moi aujourd'hui, s'il te plaît ?"
    req = route_request(text, [], NOW, "", [], detect_language(text))
    blocks = [b for b in req.messages[-1].content if isinstance(b, TextBlock)]
    told = [b.text for b in blocks if "writes in" in b.text]
    assert told == ["[router] The person writes in French (fr)."]
    resp = await OfflineModel().complete(req)
    call = next(b for b in resp.content if isinstance(b, ToolUseBlock))
    assert call.input["decision"] == "answer" and "From the model catalogue" in str(
        call.input["answer"]
    )

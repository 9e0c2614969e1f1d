"""The creative app as a place to work, in a real Chromium against a real `lomo up`: a
reply box inside the task with its reply streamed there, a card revised in words, Enter
sends and Shift+Enter breaks the line, every screen at desktop and phone width without
horizontal scroll and with 0 serious or critical axe-core violations, and every control
reached by keyboard with a visible focus. Screenshots and axe reports go to
test-artifacts/web/; any console or page error fails the test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import playwright.sync_api as sync_api
import pytest

from tests.up_support import running_up, up_env
from tests.web_support import PageWatch, api_client, audit, browser_page, open_app

pytestmark = pytest.mark.slow
expect = sync_api.expect
# Each test asks for other posters: the same words again would go to the earlier task.
POSTERS = "Make me a series of retro-style brand posters for a {subject}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    # Slow enough that a reply is seen arriving in pieces.
    with running_up(
        tmp_path_factory.mktemp("web-reach") / "data",
        up_env(LOMO_OFFLINE_STREAM_CHARS_PER_SECOND="40"),
    ) as st:
        yield st


def _ask_for_posters(page: Any, subject: str) -> Any:
    """The poster series from the entry box, sent with Enter; its price card, in the task."""
    page.get_by_role("textbox", name="Message").fill(POSTERS.format(subject=subject))
    page.get_by_role("textbox", name="Message").press("Enter")
    card = page.locator(".task-detail .card-price")
    expect(card).to_be_visible(timeout=90_000)
    return card


def _fits(page: Any, width: int) -> None:
    scroll = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert scroll <= width, f"the page scrolls sideways: {scroll} px wide at {width} px"


def _screen(w: PageWatch, width: int, name: str, audits: dict[str, Any]) -> None:
    _fits(w.page, width)
    w.screenshot(name)
    audits[name] = audit(w.page, f"{name}-{width}")


@pytest.mark.parametrize("width", [1280, 360])
def test_each_screen_fits_and_passes_axe(browser: Any, stack: dict[str, Any], width: int) -> None:
    audits: dict[str, Any] = {}
    with browser_page(browser, f"screens-{width}", width=width, axe=True) as w:
        page = w.page
        page.goto(stack["app_url"])
        expect(page.get_by_label("Token")).to_be_visible()
        _screen(w, width, "sign-in", audits)
        page.get_by_label("Token").fill(stack["demo_token"])
        page.get_by_label("Token").press("Enter")
        expect(page.locator("form.entry textarea")).to_be_visible()
        expect(page.locator(".objects, .workspace-panel p.muted").first).to_be_visible()
        _screen(w, width, "main", audits)
        card = _ask_for_posters(page, {1280: "bakery", 360: "florist"}[width])
        expect(card.get_by_role("textbox", name="Or say what to change")).to_be_visible()
        expect(page.get_by_role("textbox", name="Reply")).to_be_visible()
        _screen(w, width, "task-card", audits)
        page.locator("nav.tabs [data-tab=memory]").click()
        expect(page.locator(".memory-panel h3").first).to_be_visible()
        _screen(w, width, "memory", audits)
    bad = {
        screen: [v for v in a["violations"] if v["impact"] in ("serious", "critical")]
        for screen, a in audits.items()
    }
    assert not any(bad.values()), bad


def test_reply_in_the_task_streams_there_and_a_card_is_revised_in_words(
    browser: Any, stack: dict[str, Any]
) -> None:
    with browser_page(browser, "reply", width=1280) as w:
        page = w.page
        open_app(page, stack)
        entry = page.get_by_role("textbox", name="Message")
        entry.fill("one")
        entry.press("Shift+Enter")
        entry.press_sequentially("two")
        expect(entry).to_have_value("one\ntwo")  # Shift+Enter broke the line, sent nothing
        entry.fill("")
        card = _ask_for_posters(page, "jazz club")
        expect(entry).to_have_value("")  # Enter sent it
        card_id = card.get_attribute("data-card-id")
        assert card_id
        revise = card.get_by_role("textbox", name="Or say what to change")
        revise.fill("Only two posters, please")
        revise.press("Shift+Enter")
        revise.press_sequentially("and in teal")
        w.screenshot("revise-typed")
        revise.press("Enter")
        expect(page.locator(".task-detail .card-price")).to_have_count(0, timeout=30_000)
        with api_client(stack) as api:
            answered = api.get(f"/v1/cards/{card_id}").json()
        assert answered["status"] == "answered"
        assert answered["answer"]["action"] == "revise"
        assert answered["answer"]["text"] == "Only two posters, please\nand in teal"
        task = answered["task_id"]

        reply = page.get_by_role("textbox", name="Reply")
        reply.fill("Make the first one brighter")
        reply.press("Shift+Enter")
        reply.press_sequentially("with a sun")
        expect(reply).to_have_value("Make the first one brighter\nwith a sun")
        reply.press("Enter")
        expect(reply).to_have_value("")
        expect(page.locator(".task-detail .reply-status")).to_have_text("Sent to this task.")
        # The task's reply, in the task, while it is written.
        draft = page.locator(f".task-detail .task-drafts li.streaming[data-task-id={task}]")
        expect(draft.first).to_be_visible(timeout=90_000)
        w.screenshot("reply-streaming")
        expect(draft).to_have_count(0, timeout=90_000)
        expect(page.locator(".task-detail .task-thread li.agent").first).to_be_visible()
        w.screenshot("reply-done")

        # The person's reply stands in the task's own lines too.
        mine = page.locator(".task-detail .task-thread li.person", has_text="with a sun")
        expect(mine).to_have_count(1, timeout=30_000)
    with api_client(stack) as api:
        items = api.get("/v1/thread", params={"limit": 1000}).json()["items"]
        ids = [
            i["message_id"]
            for i in items
            if i["type"] == "message.received"
            and i.get("text") == "Make the first one brighter\nwith a sun"
        ]
        assert len(ids) == 1, ids
        routing = api.get(f"/v1/messages/{ids[0]}").json()["routing"]
    assert routing["task_id"] == task and routing["deterministic"], routing


def test_every_control_is_reached_by_keyboard_with_a_visible_focus(
    browser: Any, stack: dict[str, Any]
) -> None:
    with browser_page(browser, "keyboard", width=1280) as w:
        page = w.page
        open_app(page, stack)
        _ask_for_posters(page, "bicycle workshop")
        expect(page.get_by_role("textbox", name="Reply")).to_be_visible()
        page.wait_for_timeout(1000)  # the last re-render after the card settles
        controls = page.evaluate(
            "() => { const all = [...document.querySelectorAll("
            "'button, textarea, input, select, a[href]')]"
            ".filter((e) => !e.disabled && e.getClientRects().length);"
            " all.forEach((e, i) => { e.dataset.kbd = String(i); }); return all.length; }"
        )
        assert controls > 10
        reached: set[str] = set()
        unseen_focus: list[str] = []
        for _ in range(controls + 15):
            page.keyboard.press("Tab")
            info = page.evaluate(
                "() => { const e = document.activeElement; const s = getComputedStyle(e);"
                " return { kbd: e.dataset.kbd || null, tag: e.tagName, text: (e.textContent"
                " || e.name || '').slice(0, 30), outline: s.outlineStyle !== 'none'"
                " && parseFloat(s.outlineWidth) >= 2 }; }"
            )
            if info["kbd"] is not None:
                reached.add(info["kbd"])
                if not info["outline"]:
                    unseen_focus.append(f"{info['tag']} {info['text']}")
        w.screenshot("focus")
        missing = page.evaluate(
            "(seen) => [...document.querySelectorAll('[data-kbd]')]"
            ".filter((e) => !seen.includes(e.dataset.kbd))"
            ".map((e) => e.tagName + ' ' + (e.textContent || e.name || '').slice(0, 30))",
            sorted(reached),
        )
        assert not missing, f"not reached by Tab: {missing}"
        assert not unseen_focus, f"focused without a visible outline: {unseen_focus}"

"""Getting the person back, in a real Chromium against a real `lomo up`: while the page is
hidden, each new question (a card) raises a browser notification and a count in the
title; answering a card lowers the count, showing the page clears it. Permission is
asked once, from a click, and remembered. The hidden page is emulated by an init script
(document.visibilityState and a visibilitychange event); window.Notification is wrapped
to record what was shown. Screenshots in test-artifacts/web/, 0 serious or critical
axe-core violations, any console or page error fails the test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import playwright.sync_api as sync_api
import pytest

from tests.up_support import running_up, until, up_env
from tests.web_support import AXE, PageWatch, api_client, audit, open_app

pytestmark = pytest.mark.slow
expect = sync_api.expect

HIDDEN = """(() => {
  let hidden = false;
  Object.defineProperty(Document.prototype, "visibilityState",
    { configurable: true, get() { return hidden ? "hidden" : "visible"; } });
  Object.defineProperty(Document.prototype, "hidden",
    { configurable: true, get() { return hidden; } });
  window.__setHidden = (v) => {
    hidden = v;
    document.dispatchEvent(new Event("visibilitychange"));
  };
  window.__notes = [];
  window.__asked = 0;
  const Real = window.Notification;
  class Recorded extends Real {
    constructor(title, options = {}) {
      super(title, options);
      window.__notes.push({ title, body: options.body, tag: options.tag });
    }
    static requestPermission() { window.__asked += 1; return Real.requestPermission(); }
  }
  window.Notification = Recorded;
})();"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with running_up(tmp_path_factory.mktemp("web-attention") / "data", up_env()) as st:
        yield st


@contextmanager
def _page(browser: Any, name: str, width: int, granted: bool) -> Iterator[PageWatch]:
    context = browser.new_context(locale="en-US", viewport={"width": width, "height": 1000})
    context.add_init_script(path=str(AXE))
    context.add_init_script(HIDDEN)
    if granted:
        context.grant_permissions(["notifications"])
    watch = PageWatch(context.new_page(), name)
    try:
        yield watch
    finally:
        context.close()
    watch.assert_clean()


def _ask_for_posters(stack: dict[str, Any], subject: str, before: set[str]) -> dict[str, Any]:
    """A poster series asked for over the api; its price card, once open."""
    text = f"Make me a series of retro-style brand posters for a {subject}"
    with api_client(stack) as api:
        assert api.post("/v1/messages", json={"text": text}).status_code in (200, 201, 202)

        def card() -> dict[str, Any] | None:
            cards = api.get("/v1/cards", params={"status": "open"}).json()["cards"]
            fresh = [c for c in cards if c["card_id"] not in before]
            return fresh[0] if fresh else None

        return dict(until(card, 120, f"the {subject} posters' card"))


def _serious(report: dict[str, Any]) -> list[Any]:
    return [v for v in report["violations"] if v["impact"] in ("serious", "critical")]


def test_hidden_page_counts_and_notifies_new_questions(browser: Any, stack: dict[str, Any]) -> None:
    with _page(browser, "attention", 1280, granted=True) as w:
        page = w.page
        open_app(page, stack)
        expect(page.locator("html")).to_have_attribute("data-attention", "0")
        # The browser already allows notifications: nothing to ask.
        expect(page.locator(".notify-ask")).to_have_count(0)
        page.evaluate("() => window.__setHidden(true)")
        first = _ask_for_posters(stack, "bakery", set())
        expect(page).to_have_title("(1) Lomo", timeout=30_000)
        second = _ask_for_posters(stack, "florist", {first["card_id"]})
        expect(page).to_have_title("(2) Lomo", timeout=30_000)
        notes = page.evaluate("() => window.__notes")
        assert [(n["tag"], n["body"]) for n in notes] == [
            (first["card_id"], first["title"]),
            (second["card_id"], second["title"]),
        ]
        assert page.evaluate("() => window.__asked") == 0
        w.screenshot("hidden-two")
        with api_client(stack) as api:
            r = api.post(f"/v1/cards/{first['card_id']}/actions", json={"action": "reject"})
            assert r.status_code == 200, r.text
        # The answered card leaves the count (the task may ask anew: that one counts).
        _title_counts(page, stack, seen=set())
        assert first["card_id"] not in _open(stack)
        page.evaluate("() => window.__setHidden(false)")
        expect(page).to_have_title("Lomo")
        expect(page.locator("html")).to_have_attribute("data-attention", "0")
        seen = _open(stack)
        w.screenshot("visible-again")
        # Hidden again: what was open while the page showed is seen and never counts.
        page.evaluate("() => window.__setHidden(true)")
        page.wait_for_timeout(1000)
        _title_counts(page, stack, seen)
        tags = [n["tag"] for n in page.evaluate("() => window.__notes")]
        assert len(tags) == len(set(tags)) and not seen & set(tags[2:]), tags


def _open(stack: dict[str, Any]) -> set[str]:
    with api_client(stack) as api:
        cards = api.get("/v1/cards", params={"status": "open"}).json()["cards"]
    return {c["card_id"] for c in cards}


def _title_counts(page: Any, stack: dict[str, Any], seen: set[str]) -> None:
    """The title counts exactly the open cards not in `seen` (page and api agree)."""

    def agree() -> bool:
        fresh = len(_open(stack) - seen)
        return page.title() == (f"({fresh}) Lomo" if fresh else "Lomo")

    until(agree, 30, "the title's count matches the new open cards")


@pytest.mark.parametrize("width", [1280, 360])
def test_permission_is_asked_once_from_a_click(
    browser: Any, stack: dict[str, Any], width: int
) -> None:
    with _page(browser, f"notify-ask-{width}", width, granted=False) as w:
        page = w.page
        open_app(page, stack)
        ask = page.get_by_role("button", name="Notify me when a task needs me")
        expect(ask).to_be_visible()
        w.screenshot("ask")
        assert not _serious(report := audit(page, f"notify-ask-{width}")), report
        assert page.evaluate("() => window.__asked") == 0  # not before the click
        ask.click()
        expect(ask).to_have_count(0)
        assert page.evaluate("() => window.__asked") == 1
        page.reload()
        expect(page.locator("form.entry textarea")).to_be_visible()
        expect(page.locator("html")).to_have_attribute("data-attention", "0")
        expect(page.locator(".notify-ask")).to_have_count(0)  # remembered
        assert page.evaluate("() => window.__asked") == 0

"""The person's messages inside a task, in a real Chromium against a real `lomo up`: the
"received"/"read" mark follows the event stream, "Withdraw" takes back a message the
(paused) task has not read, and "Move", by keyboard, sends a read one to another task.
The page with the move picker open has no serious or critical axe-core violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import playwright.sync_api as sync_api
import pytest

from tests.up_support import running_up, until, up_env
from tests.web_support import api_client, audit, browser_page, open_app

pytestmark = pytest.mark.slow
expect = sync_api.expect


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with running_up(
        tmp_path_factory.mktemp("web-marks") / "data", up_env(LOMO_GENERATION_WAIT_SECONDS="3")
    ) as st:
        yield st


def _task_of(st: dict[str, Any], words: str) -> str:
    with api_client(st) as api:
        mid = api.post("/v1/messages", json={"text": words}).json()["message_id"]

        def routed() -> str | None:
            return api.get(f"/v1/messages/{mid}").json()["routing"].get("task_id")

        return str(until(routed, 90, f"{words!r} is routed"))


def _reply(page: Any, words: str) -> Any:
    page.locator("form.reply textarea").fill(words)
    page.locator("form.reply button[type=submit]").click()
    line = page.locator(".task-thread li.person", has_text=words)
    expect(line).to_be_visible(timeout=30_000)
    return line


def test_marks_withdraw_and_move_in_a_task(browser: Any, stack: dict[str, Any]) -> None:
    posters = _task_of(stack, "Make me a series of retro-style brand posters")
    logo = _task_of(stack, "Design a logo for my bakery")
    with browser_page(browser, "marks", axe=True) as w, api_client(stack) as api:
        page = w.page
        open_app(page, stack)
        row = page.locator(".task-list li", has_text="retro-style brand posters")
        row.locator("button").click()
        expect(page.locator(".task-detail h2")).to_contain_text("posters", timeout=30_000)

        assert api.post(f"/v1/tasks/{posters}/pause").status_code == 200
        until(lambda: api.get(f"/v1/tasks/{posters}").json()["status"] == "paused", 60, "paused")
        held = _reply(page, "use neon green everywhere")
        expect(held.locator(".mark")).to_have_text("received", timeout=30_000)
        w.screenshot("received")
        held.locator("button.withdraw").click()
        expect(held.locator(".mark")).to_have_text("withdrawn", timeout=30_000)
        expect(held.locator("button")).to_have_count(0)
        assert (
            api.get(f"/v1/messages/{held.get_attribute('data-message-id')}").json()["state"]
            == "withdrawn"
        )

        assert api.post(f"/v1/tasks/{posters}/resume").status_code == 200
        line = _reply(page, "put a small moon in the corner")
        expect(line.locator(".mark")).to_have_text("read", timeout=90_000)
        expect(line.locator("button.withdraw")).to_have_count(0)
        w.screenshot("read")

        # By keyboard: the Move action, the picker's task list, its button.
        line.locator("button.move").focus()
        page.keyboard.press("Enter")
        picker = line.locator("form.move-picker")
        expect(picker.locator("select option")).not_to_have_count(0, timeout=30_000)
        expect(picker.locator("select")).to_be_focused()
        report = audit(page, "move-picker")
        assert report["counts"]["serious"] == 0 and report["counts"]["critical"] == 0, report
        picker.locator("select").select_option(logo)
        picker.locator("button[type=submit]").focus()
        page.keyboard.press("Enter")
        expect(line.locator(".mark")).to_have_text("moved", timeout=30_000)
        w.screenshot("moved")
        mid = line.get_attribute("data-message-id")
        moved = api.get(f"/v1/messages/{mid}").json()
        assert moved["state"] == "moved" and moved["moved_to"]["task_id"] == logo

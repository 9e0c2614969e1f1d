"""The creative app in a real Chromium (Playwright) against a real `lomo up`:
sign-in and bad tokens, the cat image from the entry box to the visible picture, the poster
series answered by clicking its price and select cards, an edit conflict when the agent
changed the document the page has open, the event stream resuming after the api died,
an upload over the limit, and a flow run from its Run button. Every step leaves a
screenshot in test-artifacts/web/; any console or page error fails the test."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import playwright.sync_api as sync_api
import pytest

from tests.up_support import all_events, running_up, until, up_env
from tests.web_support import api_client, browser_page, open_app

pytestmark = pytest.mark.slow
expect = sync_api.expect
UPLOAD_LIMIT = 200_000


def _sim_auth(st: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {st['sim_token']}"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("web") / "data"
    env = up_env(
        LOMO_MAX_UPLOAD_BYTES=str(UPLOAD_LIMIT),
        LOMO_RESTART_INITIAL_SECONDS="0.2",
        LOMO_HEARTBEAT_TIMEOUT_SECONDS="2",
        LOMO_GENERATION_WAIT_SECONDS="3",
        # Slow enough that a reply is seen arriving in pieces.
        LOMO_OFFLINE_STREAM_CHARS_PER_SECOND="40",
    )
    with running_up(data_dir, env) as st:
        st["data_dir"] = data_dir
        yield st


def _say(page: Any, text: str) -> None:
    page.locator("form.entry textarea").fill(text)
    page.locator("form.entry button[type=submit]").click()


def test_wrong_and_expired_tokens_show_the_sign_in_page(
    browser: Any, stack: dict[str, Any]
) -> None:
    with browser_page(browser, "login") as w:
        page = w.page
        page.goto(stack["app_url"])
        expect(page.locator("main.login form")).to_be_visible()
        page.fill("input[name=token]", "lomo_not-a-real-token")
        page.click("main.login button[type=submit]")
        expect(page.locator("main.login .msg.error")).to_contain_text("unknown")
        w.screenshot("wrong-token")
        # A token that stopped being valid (kept from an earlier session): sign-in page.
        page.evaluate("localStorage.setItem('lomo.token', 'lomo_revoked')")
        page.reload()
        expect(page.locator("main.login .msg.error")).to_contain_text("no longer valid")
        assert "Traceback" not in page.content()
        page.fill("input[name=token]", stack["demo_token"])
        page.click("main.login button[type=submit]")
        expect(page.locator("form.entry textarea")).to_be_visible()
        w.screenshot("signed-in")
    with browser_page(browser, "login-de", locale="de-DE") as w:
        w.page.goto(stack["app_url"])
        expect(w.page.locator("main.login h2")).to_have_text("Anmelden")
        w.screenshot("german")


def test_cat_image_from_the_entry_box_to_the_picture(browser: Any, stack: dict[str, Any]) -> None:
    with browser_page(browser, "cat") as w:
        page = w.page
        open_app(page, stack)
        w.screenshot("empty")
        _say(page, "Generate an image of a red tabby cat")
        routed = page.locator(".entry-result .routed")
        expect(routed).to_be_visible(timeout=60_000)  # where it went, without choosing
        w.screenshot("routed")
        # The agent's reply arrives while it is written, then stands as the final text.
        draft = page.locator(".drafts li.streaming")
        expect(draft.first).to_be_visible(timeout=60_000)
        w.screenshot("streaming")
        expect(draft).to_have_count(0, timeout=60_000)
        img = page.locator(".task-detail .artifact img")
        expect(img).to_be_visible(timeout=120_000)
        # Loaded, as pixels: asked of whichever element is there (the detail re-renders on
        # each event, so the element seen visible above may be replaced meanwhile).
        page.wait_for_function(
            "() => { const i = document.querySelector('.task-detail .artifact img');"
            " return !!i && i.complete && i.naturalWidth > 0; }",
            timeout=60_000,
        )
        expect(page.locator(".task-detail .task-head .badge")).to_have_attribute(
            "data-status", "completed", timeout=60_000
        )
        expect(page.locator(".task-list li[data-status=completed]")).to_have_count(1)
        # The runtime presented the result in the thread, as a link to its task.
        result = page.locator(".thread li.agent button.result")
        expect(result).to_have_count(1, timeout=30_000)
        expect(result).to_contain_text("Here is your image")
        w.screenshot("image")


def test_poster_series_answered_by_clicking(browser: Any, stack: dict[str, Any]) -> None:
    with browser_page(browser, "posters") as w:
        page = w.page
        open_app(page, stack)
        _say(page, "Make me a series of retro-style brand posters")
        price = page.locator(".task-detail .card-price")
        expect(price).to_be_visible(timeout=90_000)
        expect(price.locator(".price")).to_contain_text("€")
        w.screenshot("price-card")
        price.locator("[data-action=confirm]").click()
        select = page.locator(".task-detail .card-select")
        expect(select).to_be_visible(timeout=120_000)
        thumbs = select.locator(".thumb img")
        expect(thumbs).to_have_count(4, timeout=60_000)  # the drafts, as pictures
        w.screenshot("select-card")
        select.locator(".thumb").nth(1).click()
        badge = page.locator(".task-detail .task-head .badge")
        expect(badge).to_have_attribute("data-status", "completed", timeout=180_000)
        expect(page.locator(".task-detail .artifact img")).to_have_count(7, timeout=60_000)
        expect(page.locator(".task-detail .checklist [data-status=done]")).not_to_have_count(0)
        w.screenshot("finals")
    with api_client(stack) as api:
        cards = api.get("/v1/cards").json()["cards"]
        kinds = [c["kind"] for c in cards if c["status"] == "answered"]
        assert "price" in kinds and "select" in kinds


def _agent_edits(st: dict[str, Any], object_id: str, old: str, new: str) -> None:
    """The agent's real tool path (EditDocument, authored by a task) on the stack's DB."""
    from lomo.db.engine import Database
    from lomo.settings import Settings
    from tools.base import ToolCallContext, ToolDeps
    from tools.workspace import EditDocument
    from workspace.blobs import make_asset_store

    async def run() -> None:
        # The stack's own SQLite file, whatever this test process's LOMO_* say.
        settings = Settings(data_dir=st["data_dir"], database_url=None)
        db = Database(settings.resolved_database_url)
        task = {"task_id": _a_task(st)}
        async with httpx.AsyncClient() as http:
            deps = ToolDeps(db=db, http=http, assets=make_asset_store(settings), settings=settings)
            call = f"{task['task_id']}:90:1:0"
            ctx = ToolCallContext(task["task_id"], await _user_id(db), call, 90, 1, 0)
            result = await EditDocument(deps).run(
                ctx, {"object_id": object_id, "edits": [{"old": old, "new": new}]}
            )
            assert result.status == "done", result.result
        await db.dispose()

    # Playwright's sync API owns this thread's event loop: run the tool on another thread.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result(timeout=60)


def _a_task(st: dict[str, Any]) -> str:
    """A task of the person's, for the agent's edit to be authored by."""
    with api_client(st) as api:
        mid = api.post("/v1/messages", json={"text": "Generate an image of a lighthouse"}).json()

        def routed() -> str | None:
            routing = api.get(f"/v1/messages/{mid['message_id']}").json()["routing"]
            return routing.get("task_id")

        return str(until(routed, 60, "the message is routed"))


async def _user_id(db: Any) -> str:
    from sqlalchemy import select

    from lomo.db.models import User

    async with db.session() as s:
        user = await s.scalar(select(User).where(User.name == "demo"))
        assert user is not None
        return str(user.id)


def test_edit_conflict_when_the_agent_changed_the_open_document(
    browser: Any, stack: dict[str, Any]
) -> None:
    with api_client(stack) as api:
        r = api.post(
            "/v1/objects",
            json={
                "type": "document",
                "name": "storyboard",
                "content": {"text": "Shot 1: a cat.\nShot 2: a dog."},
            },
        )
        oid = r.json()["object_id"]
    with browser_page(browser, "conflict") as w:
        w.allowed.add("409")  # the refused save is the point of this test
        page = w.page
        open_app(page, stack)
        page.locator(f".objects [data-object-id={oid}] button.link").click()
        area = page.locator(".editor textarea")
        expect(area).to_have_value("Shot 1: a cat.\nShot 2: a dog.")
        _agent_edits(stack, oid, "Shot 2: a dog.", "Shot 2: a dog on a skateboard.")
        expect(page.locator(".workspace-panel .msg.warn")).to_contain_text("task:", timeout=30_000)
        area.fill("Shot 1: a cat in the rain.\nShot 2: a dog.")
        page.locator(".editor button.primary").click()
        conflict = page.locator(".conflict")
        expect(conflict).to_be_visible()
        expect(conflict).to_have_attribute("data-current-version", "2")
        expect(conflict.locator(".changed")).to_contain_text("Shot 2")
        expect(conflict.locator("pre.mine")).to_contain_text("in the rain")
        w.screenshot("conflict")
        with api_client(stack) as api:  # nothing was overwritten
            assert api.get(f"/v1/objects/{oid}").json()["content"]["text"].endswith("skateboard.")
        conflict.locator("button", has_text="Reload").click()
        expect(area).to_have_value("Shot 1: a cat.\nShot 2: a dog on a skateboard.")
        area.fill("Shot 1: a cat in the rain.\nShot 2: a dog on a skateboard.")
        page.locator(".editor button.primary").click()
        expect(page.locator(".workspace-panel .msg.ok")).to_contain_text("3")
        w.screenshot("re-applied")
    with api_client(stack) as api:
        doc = api.get(f"/v1/objects/{oid}").json()
        assert doc["version"] == 3 and doc["content"]["text"].startswith(
            "Shot 1: a cat in the rain"
        )
        versions = api.get(f"/v1/objects/{oid}/versions").json()["versions"]
        assert [v["created_by"].split(":")[0] for v in versions] == ["user", "task", "user"]


def test_a_flow_runs_from_its_run_button(browser: Any, stack: dict[str, Any]) -> None:
    """A flow opened in the workspace tab runs from its Run button; the status line
    follows the run to its end (a free flow: one document node)."""
    with api_client(stack) as api:
        doc = api.post(
            "/v1/objects",
            json={"type": "document", "name": "board", "content": {"text": "Shot 1: a pier."}},
        ).json()["object_id"]
        node = {"type": "document", "params": {"object_id": doc}, "inputs": []}
        flow = api.post(
            "/v1/objects",
            json={"type": "flow", "name": "board flow", "content": {"nodes": {"board": node}}},
        ).json()["object_id"]
    with browser_page(browser, "flow-run") as w:
        page = w.page
        open_app(page, stack)
        page.locator(f".objects [data-object-id={flow}] button.link").click()
        page.locator(".editor button.run-flow").click()
        line = page.locator(".editor .run")
        expect(line).to_have_attribute("data-status", "succeeded", timeout=60_000)
        expect(line).to_contain_text("1 of 1")
        w.screenshot("flow-run")
    with api_client(stack) as api:
        runs = api.get(f"/v1/objects/{flow}/runs").json()["runs"]
        assert [r["status"] for r in runs] == ["succeeded"]
        assert runs[0]["nodes"]["board"]["object_id"] == doc


def test_events_resume_after_the_api_dies(browser: Any, stack: dict[str, Any]) -> None:
    with browser_page(browser, "sse") as w:
        # While the api is away the page's fetches fail: expected, and only then.
        w.allowed.update(
            {
                "ERR_CONNECTION_REFUSED",
                "ERR_CONNECTION_RESET",
                "ERR_EMPTY_RESPONSE",
                "ERR_INCOMPLETE_CHUNKED_ENCODING",
            }
        )
        page = w.page
        open_app(page, stack)
        # Functions, not expressions: an expression is eval()ed in the page, which its CSP forbids.
        page.wait_for_function("() => window.__lomo.connected && window.__lomo.seqs.length > 0")
        with httpx.Client(base_url=stack["sim_url"], headers=_sim_auth(stack)) as sim:
            sim.post("/sim/faults", json={"latency_scale": 60})
        _say(page, "Generate an image of a green frog")
        expect(page.locator(".task-detail .task-head .badge")).to_have_attribute(
            "data-status", "waiting_generation", timeout=90_000
        )
        pid = json.loads((stack["data_dir"] / "stack.json").read_text())["pids"]["api"]
        os.kill(pid, signal.SIGKILL)
        page.wait_for_function("() => !window.__lomo.connected", timeout=30_000)
        w.screenshot("api-down")
        expect(page.locator(".task-detail .task-head .badge")).to_have_attribute(
            "data-status", "completed", timeout=180_000
        )
        expect(page.locator(".task-detail .artifact img")).to_be_visible(timeout=60_000)
        w.screenshot("resumed")
        with api_client(stack) as api:
            everything = [e["seq"] for e in all_events(api)]
        page.wait_for_function(
            f"() => window.__lomo.seqs.at(-1) === {everything[-1]}", timeout=30_000
        )
        seen = page.evaluate("window.__lomo.seqs")
        assert seen == everything, "an event was lost or repeated across the reconnect"
        with httpx.Client(base_url=stack["sim_url"], headers=_sim_auth(stack)) as sim:
            sim.delete("/sim/faults")


def test_an_upload_over_the_limit_is_refused_clearly(
    browser: Any, stack: dict[str, Any], tmp_path: Path
) -> None:
    big = tmp_path / "big.png"
    big.write_bytes(b"\x89PNG" + os.urandom(UPLOAD_LIMIT + 1000))
    small = tmp_path / "small.txt"
    small.write_bytes(b"hello")
    with browser_page(browser, "upload") as w:
        page = w.page
        open_app(page, stack)
        page.set_input_files("input[name=upload]", str(big))
        expect(page.locator(".workspace-panel .msg.error")).to_contain_text("limit is 0.2 MB")
        w.screenshot("too-large")
        page.set_input_files("input[name=upload]", str(small))
        expect(page.locator(".workspace-panel .msg.ok")).to_be_visible()
        expect(page.locator(".objects li", has_text="small.txt")).to_have_count(1)
    with api_client(stack) as api:
        names = [o["name"] for o in api.get("/v1/objects").json()["objects"]]
        assert "big.png" not in names
        # The server refuses it too, before reading the body, with the documented body.
        data = base64.b64encode(big.read_bytes()).decode()
        r = api.post(
            "/v1/objects",
            json={
                "type": "asset",
                "name": "big.png",
                "content": {"media_type": "image/png", "data_base64": data},
            },
        )
        assert r.status_code == 413 and r.json()["error"] == "too_large", r.text
        assert "big.png" not in [o["name"] for o in api.get("/v1/objects").json()["objects"]]


def test_memory_panel_shows_provenance_and_forgets_by_card(
    browser: Any, stack: dict[str, Any]
) -> None:
    with browser_page(browser, "memory") as w:
        page = w.page
        open_app(page, stack)
        _say(page, "Our brand's main colour is blue.")
        page.locator("nav.tabs [data-tab=memory]").click()
        item = page.locator(".memory-panel li", has_text="blue")
        for _ in range(240):  # extraction runs in the background; the tab is re-read on open
            if item.count():
                break
            page.locator("nav.tabs [data-tab=workspace]").click()
            page.locator("nav.tabs [data-tab=memory]").click()
            page.wait_for_timeout(500)
        expect(item.first).to_be_visible()
        expect(item.first).to_contain_text("1 message")  # where it came from
        w.screenshot("remembered")
        item.first.locator("button", has_text="Forget this").click()
        card = page.locator(".memory-panel .card-forget")
        expect(card).to_be_visible()
        w.screenshot("forget-card")
        card.locator("[data-action=confirm]").click()
        expect(page.locator(".memory-panel li", has_text="blue")).to_have_count(0, timeout=60_000)
        w.screenshot("forgotten")
    with api_client(stack) as api:
        memories = api.get("/v1/memory").json()["memories"]
        assert not [m for m in memories if "blue" in m["content"] and m["status"] == "active"]

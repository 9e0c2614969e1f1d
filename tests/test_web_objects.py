"""Work objects in the app, in a real Chromium against a real `lomo up`: a document's
history with the lines changed since an old version and Restore through the same
version check as any edit (a restore on a version that moved on is refused, said and
reloaded), and the simulator's real results shown as what they are: the 3D model drawn
by three.js (served by the api, never a CDN) on a canvas with real pixels, the audio
and the video playing. At desktop and phone width, with 0 serious or critical axe-core
violations, no raw ids in what the person reads, and any console or page error failing
the test. Screenshots go to the test's tmp dir."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import playwright.sync_api as sync_api
import pytest
from PIL import Image

from tests.up_support import running_up, until, up_env
from tests.web_support import PageWatch, api_client, audit, browser_page, open_app

pytestmark = pytest.mark.slow
expect = sync_api.expect
WIDTHS = [1280, 360]
# The platform's ids (obj_…, tsk_…, ord_…): never in the text a person reads.
RAW_ID = re.compile(r"\b[a-z]{3}_[0-9a-z]{20,}\b")
REQUESTS = {
    "3d": "Generate a 3D model of a red fox",
    "audio": "Generate an audio clip of rain on a roof",
    "video": "Make a two-second video of blue waves",
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with running_up(tmp_path_factory.mktemp("web-objects") / "data", up_env()) as st:
        yield st


@pytest.fixture(scope="module")
def results(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The three requests through the real runtime and simulator: each one's task and
    its asset (as the object list gives it)."""
    out: dict[str, dict[str, Any]] = {}
    with api_client(stack) as api:
        for kind, text in REQUESTS.items():
            mid = api.post("/v1/messages", json={"text": text}).json()["message_id"]

            def routed(mid: str = mid) -> str | None:
                return api.get(f"/v1/messages/{mid}").json()["routing"].get("task_id")

            task_id = until(routed, 60, f"{kind}: the request is routed")

            def done(task_id: str = task_id) -> dict[str, Any] | None:
                task = api.get(f"/v1/tasks/{task_id}").json()
                return task if task["status"] == "completed" and task["artifacts"] else None

            task = until(done, 180, f"{kind}: the task completes with its result")
            out[kind] = {"task": task, "object_id": task["artifacts"][0]}
        listed = {o["object_id"]: o for o in api.get("/v1/objects").json()["objects"]}
    for r in out.values():
        r["object"] = listed[r["object_id"]]
    return out


def _shot(w: PageWatch, tmp_path: Path, step: str) -> Path:
    """Kept with the other screens' shots in test-artifacts/web/."""
    return w.screenshot(step)


def _fits(page: Any, width: int) -> None:
    scroll = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert scroll <= width, f"the page scrolls sideways: {scroll} px wide at {width} px"


def _serious(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in report["violations"] if v["impact"] in ("serious", "critical")]


def _no_raw_ids(page: Any, where: str) -> None:
    text = page.locator(where).inner_text()
    assert not RAW_ID.search(text), f"a raw id in {where}: {RAW_ID.search(text)}"


def _doc(api: Any, name: str) -> str:
    """A document with three versions: by the person, then two edits."""
    text = "Shot 1: a harbour at dawn.\nShot 2: a dog on the pier.\nShot 3: boats leave."
    oid = str(
        api.post(
            "/v1/objects", json={"type": "document", "name": name, "content": {"text": text}}
        ).json()["object_id"]
    )
    for base, new in (
        (1, text.replace("a dog on the pier", "a cat on the pier")),
        (2, text.replace("a dog on the pier", "a cat on the pier") + "\nShot 4: night falls."),
    ):
        r = api.put(f"/v1/objects/{oid}", json={"base_version": base, "content": {"text": new}})
        assert r.status_code == 200, r.text
    return oid


@pytest.mark.parametrize("width", WIDTHS)
def test_history_shows_changed_lines_and_restores_through_the_version_check(
    browser: Any, stack: dict[str, Any], width: int, tmp_path: Path
) -> None:
    name = f"Harbour storyboard {width}"
    with api_client(stack) as api:
        oid = _doc(api, name)
        v1 = api.get(f"/v1/objects/{oid}", params={"version": 1}).json()["content"]["text"]
    with browser_page(browser, f"history-{width}", width=width, axe=True) as w:
        w.allowed.add("409")  # the refused restore is part of this test
        page = w.page
        open_app(page, stack)
        row = page.locator(f".objects [data-object-id={oid}]")
        expect(row).to_contain_text("document, version 3")
        row.get_by_role("button", name=f"History: {name}").click()
        history = page.locator(".history")
        expect(history.locator(".version")).to_have_count(3)
        expect(history.locator(".version").first).to_contain_text("current")
        expect(history.locator(".version").last).to_contain_text("by you")
        _fits(page, width)
        _shot(w, tmp_path, "history")
        reports = [audit(page, f"history-{width}")]

        history.locator(".version[data-version='1'] button.compare").click()
        diff = history.locator(".diff")
        expect(diff).to_have_attribute("data-from", "1")
        expect(diff.locator(".diff-removed del")).to_have_text(["Shot 2: a dog on the pier."])
        expect(diff.locator(".diff-added ins")).to_have_text(
            ["Shot 2: a cat on the pier.", "Shot 4: night falls."]
        )
        expect(diff.locator(".diff-head")).to_contain_text("2 added, 1 removed")
        # The marks are read out as words too, not only shown as colour and signs.
        expect(diff.locator(".diff-removed .sr-only")).to_have_text(["removed: "])
        _fits(page, width)
        _shot(w, tmp_path, "diff")
        reports.append(audit(page, f"history-diff-{width}"))

        history.locator(".version[data-version='1'] button.restore").click()
        expect(page.locator(".workspace-panel .msg.ok")).to_contain_text(
            "Version 1 restored as version 4"
        )
        expect(history.locator(".version").first).to_have_attribute("data-version", "4")
        with api_client(stack) as api:
            now = api.get(f"/v1/objects/{oid}").json()
            assert (now["version"], now["content"]["text"]) == (4, v1)
            # Someone else writes while the history shows version 4.
            r = api.put(
                f"/v1/objects/{oid}",
                json={"base_version": 4, "content": {"text": v1 + "\nShot 5: rain."}},
            )
            assert r.status_code == 200, r.text
        history.locator(".version[data-version='2'] button.restore").click()
        warn = page.locator(".workspace-panel .msg.warn")
        expect(warn).to_contain_text("changed meanwhile (now version 5)")
        expect(history.locator(".version").first).to_have_attribute("data-version", "5")
        _shot(w, tmp_path, "restore-refused")
        with api_client(stack) as api:  # nothing was overwritten
            now = api.get(f"/v1/objects/{oid}").json()
            assert (now["version"], now["content"]["text"]) == (5, v1 + "\nShot 5: rain.")
        _no_raw_ids(page, ".workspace-panel")
    bad = [_serious(r) for r in reports]
    assert not any(bad), bad


def _canvas_pixels(canvas: Any) -> Image.Image:
    return Image.open(io.BytesIO(canvas.screenshot())).convert("RGB")


def _drawn(img: Image.Image) -> tuple[float, int]:
    """The share of pixels unlike the viewer's background, and how many colours the
    model's pixels have (a lit solid shows several shades)."""
    background = np.array([0xF1, 0xEF, 0xEA])
    pixels = np.asarray(img, dtype=np.int32).reshape(-1, 3)
    model = pixels[np.abs(pixels - background).sum(axis=1) > 40]
    return len(model) / len(pixels), len({tuple(p) for p in model})


def _plays(page: Any, selector: str) -> dict[str, Any]:
    """Plays the element for a moment: how far it got, its size, and whether a frame
    drawn from it (a video's) has more than one colour."""
    return dict(
        page.evaluate(
            """async (sel) => {
          const m = document.querySelector(sel);
          await m.play();
          await new Promise((r) => setTimeout(r, 800));
          m.pause();
          let colours = 0;
          if (m.videoWidth) {
            const c = document.createElement("canvas");
            c.width = m.videoWidth; c.height = m.videoHeight;
            const g = c.getContext("2d");
            g.drawImage(m, 0, 0);
            const d = g.getImageData(0, 0, c.width, c.height).data;
            const seen = new Set();
            for (let i = 0; i < d.length; i += 4 * 17) {
              seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
            }
            colours = seen.size;
          }
          return { time: m.currentTime, duration: m.duration, error: m.error && m.error.code,
                   width: m.videoWidth || 0, colours };
        }""",
            selector,
        )
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_results_are_shown_as_what_they_are(
    browser: Any,
    stack: dict[str, Any],
    results: dict[str, dict[str, Any]],
    width: int,
    tmp_path: Path,
) -> None:
    model, audio, video = results["3d"], results["audio"], results["video"]
    assert model["object"]["media_type"] == "model/gltf-binary"
    with browser_page(browser, f"media-{width}", width=width, axe=True) as w:
        page = w.page
        open_app(page, stack)
        # Each result is named by the request it came from, and its kind in words.
        for r, kind in ((model, "3D model"), (audio, "audio clip"), (video, "video")):
            row = page.locator(f".objects [data-object-id={r['object_id']}]")
            expect(row.locator("button.link")).to_have_text(r["object"]["name"])
            expect(row).to_contain_text(kind)
        assert model["object"]["name"] == f"3D model: {REQUESTS['3d']}"
        _no_raw_ids(page, ".workspace-panel")

        page.locator(f".objects [data-object-id={model['object_id']}] button.link").click()
        canvas = page.locator(".editor canvas.model-view")
        expect(canvas).to_be_visible(timeout=30_000)
        caption = f"{model['object']['name']} (3D model)"
        expect(page.locator(".editor figcaption")).to_have_text(caption)
        page.wait_for_timeout(300)  # the first frame after the canvas got its size
        share, shades = _drawn(_canvas_pixels(canvas))
        assert share > 0.05 and shades >= 3, (share, shades)
        before = _canvas_pixels(canvas)
        canvas.focus()
        canvas.press("ArrowRight")
        assert _canvas_pixels(canvas).tobytes() != before.tobytes()  # it turned
        _fits(page, width)
        _shot(w, tmp_path, "model")
        reports = [audit(page, f"media-model-{width}")]

        page.locator(f".objects [data-object-id={audio['object_id']}] button.link").click()
        expect(page.locator(".editor audio[controls]")).to_be_visible()
        heard = _plays(page, ".editor audio")
        assert heard["error"] is None and heard["time"] > 0.2, heard

        page.locator(f".objects [data-object-id={video['object_id']}] button.link").click()
        expect(page.locator(".editor video[controls]")).to_be_visible()
        seen = _plays(page, ".editor video")
        assert seen["error"] is None and seen["time"] > 0.2, seen
        assert seen["width"] == 128 and seen["colours"] > 3, seen  # a decoded, drawn frame
        _fits(page, width)
        _shot(w, tmp_path, "video")
        reports.append(audit(page, f"media-video-{width}"))

        # The 3D result in its task, too: drawn there, captioned by name and kind.
        page.locator(f".task-list li[data-task-id={model['task']['task_id']}]").click()
        in_task = page.locator(".task-detail .artifact canvas.model-view")
        expect(in_task).to_be_visible(timeout=30_000)
        expect(page.locator(".task-detail .artifact figcaption")).to_contain_text("(3D model)")
        _shot(w, tmp_path, "task")
        _no_raw_ids(page, ".task-detail .artifacts")
        reports.append(audit(page, f"media-task-{width}"))
    bad = [_serious(r) for r in reports]
    assert not any(bad), bad


def test_three_is_served_by_the_api_under_the_page_csp(stack: dict[str, Any]) -> None:
    """The vendored modules come from the api with the page's own CSP, their bare
    'three' imports pointing at the served module; anything else there is a 404."""
    import httpx

    base = stack["api_url"]
    with httpx.Client(base_url=base, timeout=30) as http:
        page_csp = http.get("/").headers["content-security-policy"]
        assert "script-src 'self';" in page_csp and "unsafe" not in page_csp
        loader = http.get("/static/vendor/three/examples/jsm/loaders/GLTFLoader.js")
        assert loader.status_code == 200
        assert loader.headers["content-type"].startswith("text/javascript")
        assert "from 'three'" not in loader.text
        assert "from '/static/vendor/three/build/three.module.js'" in loader.text
        again = http.get(
            "/static/vendor/three/examples/jsm/loaders/GLTFLoader.js",
            headers={"If-None-Match": loader.headers["etag"]},
        )
        assert again.status_code == 304
        for path in ("package.json", "../../package.json", "build/three.cjs"):
            assert http.get(f"/static/vendor/three/{path}").status_code == 404


def test_an_asset_version_is_shown_again_and_restored(
    browser: Any, stack: dict[str, Any], results: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """An asset's old version plays from its History, and Restore sends its bytes again
    as a new version (the same checked PUT as an upload)."""
    import base64

    oid = results["audio"]["object_id"]
    with api_client(stack) as api:
        first = api.get(f"/v1/objects/{oid}/blob", params={"version": 1}).content
        quiet = first[:44] + bytes(len(first) - 44)  # the same WAV header, silence
        data = base64.b64encode(quiet).decode()
        r = api.put(
            f"/v1/objects/{oid}",
            json={"base_version": 1, "content": {"media_type": "audio/wav", "data_base64": data}},
        )
        assert r.status_code == 200 and r.json()["version"] == 2, r.text
    with browser_page(browser, "asset-history", axe=True) as w:
        page = w.page
        open_app(page, stack)
        name = results["audio"]["object"]["name"]
        page.get_by_role("button", name=f"History: {name}").click()
        history = page.locator(".history")
        expect(history.locator(".version")).to_have_count(2)
        history.locator(".version[data-version='1'] button.open-version").click()
        shown = history.locator(".history-detail figure[data-version='1'] audio[controls]")
        expect(shown).to_be_visible()
        heard = _plays(page, ".history-detail audio")
        assert heard["error"] is None and heard["time"] > 0.2, heard
        _shot(w, tmp_path, "asset-version")
        report = audit(page, "asset-history")
        history.locator(".version[data-version='1'] button.restore").click()
        expect(page.locator(".workspace-panel .msg.ok")).to_contain_text(
            "Version 1 restored as version 3"
        )
    with api_client(stack) as api:
        assert api.get(f"/v1/objects/{oid}/blob").content == first
    assert not _serious(report), report

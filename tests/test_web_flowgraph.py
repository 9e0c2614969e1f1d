"""A flow drawn as a graph in a real Chromium against a real `lomo up`: nodes in rows by
topological layer with an arrow per input, reached by keyboard (Tab, Enter opens a
node's form); a parameter edited in its field and saved as a new version; a save on an
old version refused and said, then re-applied on the current one; a node added, wired and
removed; a paid run's node statuses following the event stream to the end. Screenshots at
1280 and 360 px in test-artifacts/web/, 0 serious or critical axe-core violations, any
console or page error fails the test."""

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
    with running_up(tmp_path_factory.mktemp("web-flowgraph") / "data", up_env()) as st:
        yield st


def _film(api: Any, name: str) -> tuple[str, str]:
    """A document read by a still, animated by a clip, cut by an edit: four layers."""
    doc = api.post(
        "/v1/objects",
        json={"type": "document", "name": f"{name} board", "content": {"text": "A pier."}},
    ).json()["object_id"]
    nodes = {
        "board": {"type": "document", "params": {"object_id": doc}, "inputs": []},
        "still": {"type": "image", "params": {"prompt": "a pier at dusk"}, "inputs": ["board"]},
        "clip": {
            "type": "video",
            "params": {"prompt": "waves", "duration_s": 2},
            "inputs": ["still"],
        },
        "cut": {"type": "edit", "params": {"prompt": "final cut"}, "inputs": ["clip"]},
    }
    r = api.post("/v1/objects", json={"type": "flow", "name": name, "content": {"nodes": nodes}})
    assert r.status_code == 201, r.text
    return str(r.json()["object_id"]), str(doc)


def _serious(report: dict[str, Any]) -> list[Any]:
    return [v for v in report["violations"] if v["impact"] in ("serious", "critical")]


def _fits(page: Any, width: int) -> None:
    scroll = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert scroll <= width, f"the page scrolls sideways: {scroll} px wide at {width} px"


def _open_flow(page: Any, flow: str) -> Any:
    page.locator(f".objects [data-object-id={flow}] button.link").click()
    graph = page.locator(".editor svg.fg-svg")
    expect(graph).to_be_visible()
    return graph


def _node_box(page: Any, node: str) -> dict[str, float]:
    box = page.locator(f".fg-node[data-node-id={node}]").bounding_box()
    assert box is not None
    return dict(box)


@pytest.mark.parametrize("width", [1280, 360])
def test_flow_graph_is_drawn_and_its_node_edited_in_a_form(
    browser: Any, stack: dict[str, Any], width: int
) -> None:
    with api_client(stack) as api:
        flow, _doc = _film(api, f"pier film {width}")
    with browser_page(browser, f"flowgraph-{width}", width=width, axe=True) as w:
        w.allowed.add("409")  # the refused save below is on purpose
        page = w.page
        open_app(page, stack)
        graph = _open_flow(page, flow)
        expect(graph.locator(".fg-node")).to_have_count(4)
        expect(graph.locator(".fg-edge")).to_have_count(3)
        edge = graph.locator(".fg-edge[data-from=still][data-to=clip]")
        expect(edge).to_have_count(1)
        # One row per layer, inputs above what they feed.
        ys = [_node_box(page, n)["y"] for n in ("board", "still", "clip", "cut")]
        assert ys == sorted(ys) and len(set(ys)) == 4, ys
        expect(graph.locator(".fg-node[data-node-id=clip]")).to_have_attribute(
            "aria-label", "clip, video, not run, from still"
        )
        _fits(page, width)
        w.screenshot("graph")
        assert not _serious(report := audit(page, f"flowgraph-graph-{width}")), report

        # Keyboard: Tab reaches the nodes in order; Enter opens the focused one's form.
        graph.locator(".fg-node[data-node-id=board]").focus()
        page.keyboard.press("Tab")
        expect(graph.locator(".fg-node[data-node-id=still]")).to_be_focused()
        page.keyboard.press("Tab")
        expect(graph.locator(".fg-node[data-node-id=clip]")).to_be_focused()
        page.keyboard.press("Enter")
        form = page.locator("form.fg-node-form")
        expect(form.get_by_role("heading")).to_have_text("Node clip")
        expect(form.get_by_label("prompt")).to_have_value("waves")
        expect(form.get_by_label("duration_s")).to_have_attribute("type", "number")
        # Its own descendant cannot become its input.
        expect(form.locator("input[name=input][value=cut]")).to_be_disabled()
        expect(form.locator("input[name=input][value=still]")).to_be_checked()
        form.get_by_label("prompt").fill("waves at night")
        form.get_by_label("duration_s").fill("3")
        _fits(page, width)
        w.screenshot("form")
        assert not _serious(report := audit(page, f"flowgraph-form-{width}")), report
        # Keyboard again (a full-page screenshot leaves Chromium's layout stale until the
        # next focus change, which moves a button from under a mouse click).
        form.get_by_role("button", name="Save node").press("Enter")
        expect(page.locator(".fg-note .msg.ok")).to_contain_text("version 2")
        expect(graph.locator(".fg-node[data-node-id=clip]")).to_be_focused()
        with api_client(stack) as api:
            saved = api.get(f"/v1/objects/{flow}").json()
        assert saved["version"] == 2
        clip = saved["content"]["nodes"]["clip"]
        assert clip == {
            "type": "video",
            "params": {"prompt": "waves at night", "duration_s": 3},
            "inputs": ["still"],
        }
        assert saved["content"]["nodes"]["still"]["params"] == {"prompt": "a pier at dusk"}
        _conflict_then_reapply(page, stack, flow, width, w)
        _add_wire_and_remove(page, stack, flow, w)


def _conflict_then_reapply(page: Any, stack: dict[str, Any], flow: str, width: int, w: Any) -> None:
    """Someone else saves version 3 while the page has version 2 open: the page's save is
    refused and says so, nothing is overwritten, and the change re-applies on version 3."""
    with api_client(stack) as api:
        cur = api.get(f"/v1/objects/{flow}").json()
        nodes = cur["content"]["nodes"]
        nodes["cut"]["params"]["prompt"] = "cut by someone else"
        r = api.put(f"/v1/objects/{flow}", json={"base_version": 2, "content": {"nodes": nodes}})
        assert r.status_code == 200, r.text
    page.locator(".fg-node[data-node-id=still]").click()
    form = page.locator("form.fg-node-form")
    form.get_by_label("prompt").fill("a pier in fog")
    form.get_by_role("button", name="Save node").click()
    conflict = page.locator(".fg-conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_have_attribute("data-current-version", "3")
    expect(conflict).to_contain_text("changed meanwhile")
    w.screenshot("conflict")
    assert not _serious(report := audit(page, f"flowgraph-conflict-{width}")), report
    with api_client(stack) as api:  # nothing was overwritten
        now = api.get(f"/v1/objects/{flow}").json()
    assert now["version"] == 3
    assert now["content"]["nodes"]["still"]["params"]["prompt"] == "a pier at dusk"
    conflict.get_by_role("button", name="Apply my change to version 3").press("Enter")
    expect(page.locator(".fg-note .msg.ok")).to_contain_text("version 4")
    with api_client(stack) as api:
        both = api.get(f"/v1/objects/{flow}").json()["content"]["nodes"]
    assert both["still"]["params"]["prompt"] == "a pier in fog"
    assert both["cut"]["params"]["prompt"] == "cut by someone else"


def _add_wire_and_remove(page: Any, stack: dict[str, Any], flow: str, w: Any) -> None:
    """A node added with an input (a new edge), then removed with its edges."""
    page.get_by_role("button", name="Add node").click()
    form = page.locator("form.fg-node-form")
    expect(form.get_by_role("heading")).to_have_text("New node")
    form.get_by_label("Node id").fill("score")
    form.get_by_label("Type").select_option("audio")
    form.get_by_label("prompt").fill("gulls and waves")
    form.get_by_label("Parameter name").fill("loop")
    form.get_by_label("Kind").select_option("flag")
    form.get_by_role("button", name="Add parameter").click()
    form.get_by_label("loop").check()
    form.locator("input[name=input][value=still]").check()
    form.get_by_role("button", name="Save node").click()
    expect(page.locator(".fg-note .msg.ok")).to_contain_text("version 5")
    expect(page.locator(".fg-edge[data-from=still][data-to=score]")).to_have_count(1)
    w.screenshot("added")
    page.locator(".fg-node[data-node-id=score]").focus()
    with api_client(stack) as api:
        score = api.get(f"/v1/objects/{flow}").json()["content"]["nodes"]["score"]
    assert score == {
        "type": "audio",
        "params": {"prompt": "gulls and waves", "duration_s": 2, "loop": True},
        "inputs": ["still"],
    }
    page.keyboard.press("Enter")
    page.locator("form.fg-node-form").get_by_role("button", name="Remove node").press("Enter")
    expect(page.locator(".fg-note .msg.ok")).to_contain_text("version 6")
    expect(page.locator(".fg-node")).to_have_count(4)
    expect(page.locator(".fg-edge[data-to=score]")).to_have_count(0)
    with api_client(stack) as api:
        assert "score" not in api.get(f"/v1/objects/{flow}").json()["content"]["nodes"]


def _a_task(stack: dict[str, Any]) -> str:
    """A task of the person's, to own (and pay for) the run."""
    with api_client(stack) as api:
        mid = api.post("/v1/messages", json={"text": "Generate an image of a lighthouse"}).json()

        def routed() -> str | None:
            routing = api.get(f"/v1/messages/{mid['message_id']}").json()["routing"]
            return routing.get("task_id")

        return str(until(routed, 90, "the message is routed"))


# Every status each node showed, in order: recorded in the page as the graph repaints.
WATCH = """() => {
  window.__fgSeen = {};
  const note = (g) => {
    const id = g.dataset.nodeId, s = g.dataset.status;
    const seen = (window.__fgSeen[id] ||= []);
    if (seen[seen.length - 1] !== s) seen.push(s);
  };
  document.querySelectorAll('.fg-node').forEach(note);
  new MutationObserver((ms) => ms.forEach((m) => note(m.target)))
    .observe(document.querySelector('.fg-svg'),
      { subtree: true, attributeFilter: ['data-status'] });
}"""


def test_a_paid_run_shows_each_node_live(browser: Any, stack: dict[str, Any]) -> None:
    """A run started elsewhere (the api) appears on the open graph, and each node goes
    running → done on it from the event stream alone (the page does not poll)."""
    task = _a_task(stack)
    with api_client(stack) as api:
        nodes = {
            "still": {"type": "image", "params": {"prompt": "a lighthouse"}, "inputs": []},
            "clip": {
                "type": "video",
                "params": {"prompt": "beam", "duration_s": 2},
                "inputs": ["still"],
            },
        }
        flow = api.post(
            "/v1/objects", json={"type": "flow", "name": "beam", "content": {"nodes": nodes}}
        ).json()["object_id"]
    with browser_page(browser, "flowgraph-run", width=1280) as w:
        page = w.page
        open_app(page, stack)
        graph = _open_flow(page, flow)
        page.evaluate(WATCH)
        flow_run_gets = []
        page.on(
            "request", lambda r: flow_run_gets.append(r.url) if "/v1/flow-runs/" in r.url else None
        )
        with api_client(stack) as api:
            r = api.post(f"/v1/objects/{flow}/runs", json={"task_id": task})
            assert r.status_code == 202, r.text
            run = r.json()["run_id"]
        line = page.locator(".editor .run")
        expect(line).to_contain_text(run, timeout=60_000)
        w.screenshot("running")
        expect(line).to_have_attribute("data-status", "succeeded", timeout=120_000)
        expect(line).to_contain_text("2 of 2")
        for node in ("still", "clip"):
            expect(graph.locator(f".fg-node[data-node-id={node}]")).to_have_attribute(
                "data-status", "done"
            )
        w.screenshot("done")
        seen = page.evaluate("() => window.__fgSeen")
        # One read of the run per burst of its events, not a poll: the page is quiet now.
        quiet = len(flow_run_gets)
        page.wait_for_timeout(2500)
        assert len(flow_run_gets) == quiet
    for node in ("still", "clip"):
        assert seen[node][0] == "none" and "running" in seen[node], seen
        assert seen[node][-1] == "done", seen

"""Creative guides on demand through the real activities and the real SDK against the
Messages-API stand-in (tests/context_support.py): a guide loads after the stable prefix (the
bytes up to the first breakpoint never change), a domain load brings its medium's guide
along, the context view lists what is loaded, a segment close drops the guides the work no
longer uses, and the prompt cache keeps serving the history while guides come and go."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
from temporalio.client import Client

from api.app import create_app
from context.build import estimate_tokens
from context.guides import GUIDES, carried_guides, parse_guide, with_domains
from llm.types import ModelRequest, ModelResponse
from standin.model import OfflineModel
from tests.context_support import (
    _text,
    _use,
    cached_prefix_until_first_breakpoint,
    cached_share,
    context_run,
    unexplained_prefix_changes,
)
from tests.helpers import ThreadServer

TURN, SEGMENT, RECENT, STEPS = 6, 4, 3, 22
COLOURS = re.compile(
    r"\b(red|blue|green|teal|yellow|orange|ochre|purple|pink|black|white|gr[ae]y|brown)\b", re.I
)
MEDIA = {"image", "poster-series", "storyboard-film", "video", "audio", "3d"}


@dataclass
class GuidePolicy:
    """Loads the poster guide, then the image tools (their guide comes along), then the
    storyboard guide, and then works with image tools only: the storyboard guide goes
    unused and must be dropped at a close, the other two stay."""

    turn_len: int
    requests: list[ModelRequest] = field(default_factory=list)

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        if request.purpose != "task_step":
            return await OfflineModel().complete(request)
        n = len(self.requests)
        self.requests.append(request)
        script: dict[int, tuple[str, dict[str, Any]]] = {
            0: ("load_guide", {"name": "poster-series"}),
            1: ("load_tools", {"domain": "image"}),
            2: ("load_guide", {"name": "storyboard-film"}),
        }
        if n in script:
            return _use(n, *script[n])
        if n % self.turn_len == self.turn_len - 1:
            return _text(f"Part {n // self.turn_len + 1} is planned.")
        if n % 3 == 0:  # an impossible size: refused before anything is spent, still a use
            return _use(n, "generate_image", {"prompt": "poster draft", "width": 7, "height": 7})
        return _use(n, "list_objects", {})


def _task_bodies(app: Any) -> list[dict[str, Any]]:
    return [
        b
        for b in app.state.requests
        if b.get("system") and b["system"][0]["text"].startswith("You are Lomo")
    ]


def _messages_text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


def _has(body: dict[str, Any], name: str) -> bool:
    """Whether the request's history carries the guide's text (a first line of it)."""
    first = GUIDES[name].text.splitlines()[0]
    return json.dumps(first)[1:-1] in _messages_text(body)


def test_the_catalogue_covers_every_medium_with_substance() -> None:
    assert set(GUIDES) == MEDIA
    for g in GUIDES.values():
        assert 250 <= estimate_tokens(g.text) <= 700, (g.name, estimate_tokens(g.text))
        assert g.when and g.kept_by, g.name
        assert g.text.isascii(), g.name  # no escaped characters in the JSON tool result
        # No named colour in an example: a colour the person corrected or forgot would seem
        # to come back from a guide, and an example must not steer their palette.
        assert not COLOURS.search(g.text), (g.name, COLOURS.search(g.text))
    # A load of the image tools brings the image guide, not the poster one (a cat picture
    # needs no series plan); the flows tools bring the storyboard guide.
    assert with_domains(GUIDES, ["image"]) == ["image"]
    assert with_domains(GUIDES, ["flows"]) == ["storyboard-film"]
    g = parse_guide("---\nname: x\nwhen: w\nloads_with:\nkept_by: a, b\n---\ntext\n")
    assert (g.loads_with, g.kept_by, g.text) == ((), ("a", "b"), "text")


def test_a_close_keeps_only_guides_the_work_uses() -> None:
    # Read in the window: kept. Loaded before, its medium still in use: kept. Loaded before
    # and unused: dropped. Never loaded: a used domain brings only its own guide.
    assert carried_guides(GUIDES, ["audio"], [], []) == ["audio"]
    assert carried_guides(GUIDES, [], ["poster-series", "3d"], ["image"]) == [
        "image",
        "poster-series",
    ]
    assert carried_guides(GUIDES, [], ["storyboard-film"], ["image"]) == ["image"]


async def test_guides_load_after_the_prefix_list_in_the_view_and_unload_when_unused(
    db_url: str, tmp_path: Path
) -> None:
    policy = GuidePolicy(TURN)
    async with context_run(
        db_url,
        tmp_path,
        policy,  # type: ignore[arg-type]
        context_segment_steps=SEGMENT,
        context_recent_steps=RECENT,
    ) as run:
        for n in range(STEPS):
            await run.step(n)
            if n == 3:
                view_early = await _view(run)
        steps = await run.steps()
        view = await _view(run)
    bodies = _task_bodies(run.app)
    prefixes = [st.context["prefix"] for st in steps]
    assert len(bodies) == STEPS
    # 1. Nothing before the first breakpoint moved, and every change has a reason.
    assert len({cached_prefix_until_first_breakpoint(b) for b in bodies}) == 1
    assert unexplained_prefix_changes(bodies, prefixes) == []
    assert all(p["changes"] == [] for p in prefixes[1:]), [p["changes"] for p in prefixes]
    # The system text lists the catalogue (name and when), never a guide's text.
    system = bodies[0]["system"][0]["text"]
    assert all(f"- {g.name}: {g.when}" in system for g in GUIDES.values())
    assert not any(g.text.splitlines()[0] in system for g in GUIDES.values())
    # 2. A load appends the guide to the history, after the stable prefix.
    assert not _has(bodies[0], "poster-series") and _has(bodies[1], "poster-series")
    assert not _has(bodies[1], "image") and _has(bodies[2], "image")  # came with the tools
    assert "[runtime] guide image (loaded)" in _messages_text(bodies[2])
    assert _has(bodies[3], "storyboard-film")
    events = [e for p in prefixes for e in p["events"]]
    assert "guide load: poster-series" in events and "guide load: image" in events
    # 3. The view lists what is loaded, with its tokens.
    assert [g["name"] for g in view_early["loaded_guides"]] == [
        "poster-series",
        "image",
        "storyboard-film",
    ]
    sizes = {g["name"]: g["tokens"] for g in view_early["loaded_guides"]}
    assert sizes == {n: estimate_tokens(GUIDES[n].text) for n in sizes}
    # 4. The storyboard guide went unused (no flows, no video): a close dropped it; the
    # poster guide stays while image tools are used, long after its own load left the
    # verbatim window.
    drop = next(i for i, p in enumerate(prefixes) if "guide unload: storyboard-film" in p["events"])
    assert prefixes[drop]["closed"] > prefixes[drop - 1]["closed"]
    assert not any(_has(b, "storyboard-film") for b in bodies[drop:])
    assert all(_has(b, "poster-series") and _has(b, "image") for b in bodies[2:])
    assert prefixes[-1]["closed"] >= 3
    assert [g["name"] for g in view["loaded_guides"]] == ["image", "poster-series"]
    assert "guide unload" not in " ".join(view["prefix_events"])
    # 5. The cache share holds with guides loaded: every request after the first reads its
    # prefix and history from the cache and writes only what the step added. A close
    # rewrites what follows the summaries (the carried loads and guides among it), so those
    # steps read less; every other step reads nearly all.
    shares = [cached_share(st) for st in steps]
    assert shares[0] == 0.0
    closing = {i for i in range(1, STEPS) if prefixes[i]["closed"] > prefixes[i - 1]["closed"]}
    with_guides = [i for i in range(1, STEPS) if prefixes[i]["guides"]]
    steady = [shares[i] for i in with_guides if i not in closing and not prefixes[i]["events"]]
    assert min(shares[i] for i in with_guides) > 0.4, shares
    assert min(steady) > 0.95, shares
    mean = sum(shares[i] for i in with_guides) / len(with_guides)
    assert mean > 0.8, shares
    print(
        f"guides {sizes}; cache share with guides loaded: mean {mean:.3f} over "
        f"{len(with_guides)} steps, {min(steady):.3f} at least between closes"
    )


async def _view(run: Any) -> dict[str, Any]:
    app = create_app(run.settings, temporal=cast(Client, object()))
    with ThreadServer(app) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as api:
            r = await api.get(
                f"/v1/tasks/{run.task_id}/context",
                headers={"Authorization": f"Bearer {run.token}"},
            )
    assert r.status_code == 200, r.text
    return cast(dict[str, Any], r.json())

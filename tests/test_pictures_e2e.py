"""An attachment reaches the model: through the api, the task's step and the real SDK to
the Messages-API stand-in, as an image block beside the message that attached it; the
context view lists it; its bytes never enter the workflow's history."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from temporalio.client import Client

from llm.anthropic_provider import AnthropicProvider
from standin.model import OfflineModel
from standin.server import create_standin_app
from tests.helpers import ThreadServer, eventually
from tests.stack import running_stack
from tests.test_pictures import png
from tests.test_streaming import _payloads


def _images(body: dict[str, Any]) -> list[tuple[int, int, dict[str, Any]]]:
    """(message index, block index, block) of every image block in a request body."""
    return [
        (i, j, b)
        for i, m in enumerate(body["messages"])
        if isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
        if b.get("type") == "image"
    ]


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_an_attachment_reaches_the_models_request(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    app = create_standin_app(OfflineModel().complete)
    with ThreadServer(app) as server:
        provider = AnthropicProvider(api_key="k", model="claude-test", base_url=server.url)
        try:
            async with running_stack(
                tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
            ) as st:
                raw = png(1600, 1200, (30, 90, 200))
                asset = {"media_type": "image/png", "data_base64": base64.b64encode(raw).decode()}
                r = await st.api.post(
                    "/v1/objects",
                    json={"type": "asset", "name": "mood board", "content": asset},
                    headers=st.auth,
                )
                oid = r.json()["object_id"]
                msg = {"text": "Make a poster in the style of this", "attachments": [oid]}
                mid = (await st.api.post("/v1/messages", json=msg, headers=st.auth)).json()[
                    "message_id"
                ]

                async def seen() -> Any:
                    steps = [b for b in list(app.state.requests) if _images(b)]
                    return steps[0] if steps else None

                body = await eventually(seen, within=60)
                m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
                task_id = m["routing"]["task_id"]

                async def stored() -> Any:
                    # The step's context is stored with its commit, after the model answered.
                    r = await st.api.get(f"/v1/tasks/{task_id}/context", headers=st.auth)
                    return r.json() if r.status_code == 200 else None

                context = await eventually(stored, within=60)
                history = await _history(temporal_client, st.settings.task_queue)
        finally:
            await provider.aclose()

    (i, j, image) = _images(body)[0]
    shown = Image.open(io.BytesIO(base64.b64decode(image["source"]["data"])))
    assert image["source"]["media_type"] == "image/png" and shown.size == (768, 576)
    assert shown.getpixel((5, 5)) == (30, 90, 200)
    blocks = body["messages"][i]["content"]
    texts = [b["text"] for b in blocks[:j] if b.get("type") == "text"]
    assert texts[0] == "Make a poster in the style of this" and oid in texts[-1]
    layers = {layer["name"]: layer for layer in context["layers"]}
    want = {"object_id": oid, "version": 1, "media_type": "image/png", "width": 768, "height": 576}
    assert want in layers["recent_messages"]["images"]
    assert task_id in history  # the payloads were read
    assert "iVBORw0KGgo" not in history and image["source"]["data"][:64] not in history


async def _history(client: Client, task_queue: str) -> str:
    out: list[str] = []
    async for wf in client.list_workflows(f"TaskQueue = '{task_queue}'"):
        h = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        _payloads(json.loads(h.to_json()), out)
    return "\n".join(out)

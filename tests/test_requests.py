"""More of the offline stand-in's requests through the real runtime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests.helpers import eventually
from tests.stack import Stack, running_stack
from tests.test_slice import run_cat_slice


async def _replies(st: Stack) -> list[dict[str, Any]]:
    r = await st.api.get("/v1/events", params={"once": "true"}, headers=st.auth)
    events = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]
    return [e["data"] for e in events if e["type"] == "task.reply"]


async def test_capability_question_is_answered_from_the_catalogue(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        for text, lang_word in (
            ("Which resolutions does the video model support?", "catalogue"),
            ("Welche Auflösungen unterstützt das Videomodell?", "Katalog"),
        ):
            r = await st.api.post("/v1/messages", json={"text": text}, headers=st.auth)
            mid = r.json()["message_id"]

            async def answered(mid: str = mid) -> Any:
                m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
                return m if m["routing"].get("decision") else None

            m = await eventually(answered)
            assert m["routing"]["decision"] == "answer" and "task_id" not in m["routing"]
            reply = next(x for x in await _replies(st) if x.get("message_id") == mid)
            assert "1280x720" in reply["text"] and "640x360" in reply["text"]
            assert "512x512" not in reply["text"]  # the image model was not asked about
            assert lang_word in reply["text"]
        assert (await st.sim.get("/jobs")).json()["jobs"] == []  # answering spends nothing


async def test_cat_picture_becomes_a_five_second_video(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    async with running_stack(tmp_path, db_url, temporal_server, temporal_client, task_queue) as st:
        cat = await run_cat_slice(st, "Generate an image of a red tabby cat")
        cat_obj = cat["artifacts"][0]
        video = await run_cat_slice(st, "Turn yesterday's cat picture into a five-second video")
        assert video["task_id"] != cat["task_id"]
        obj = (await st.api.get(f"/v1/objects/{video['artifacts'][0]}", headers=st.auth)).json()
        assert obj["content"]["media_type"] == "video/mp4"
        blob = await st.api.get(f"/v1/objects/{obj['object_id']}/blob", headers=st.auth)
        assert blob.content[4:8] == b"ftyp"  # an MP4 container
        jobs = (await st.sim.get("/jobs")).json()["jobs"]
        assert [j["kind"] for j in jobs] == ["image", "video"]
        async with st.db.session() as s:
            from sqlalchemy import select

            from lomo.db.models import GenerationOrder

            order = await s.scalar(select(GenerationOrder).where(GenerationOrder.kind == "video"))
            assert order is not None
            assert order.params["reference_object_id"] == cat_obj
            assert order.params["duration_s"] == 5
        assert (await _replies(st))[-1]["text"].startswith("Here is your video")

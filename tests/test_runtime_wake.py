"""Wake only when the plan needs it: a lightweight picture request costs one model call.

The model marks the generation `present_when_done`; the runtime then ends the turn after
the submit, and when the job succeeds it presents the result itself (a `task.reply` naming
the asset) and completes the task without asking the model again. A failed job, or a
message the person wrote meanwhile, still wakes the model. Real HTTP, real worker, real
Temporal, the offline model counted per call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from llm.types import ModelRequest, ModelResponse, ToolUseBlock
from standin.model import OfflineModel
from tests.helpers import eventually
from tests.stack import Stack, running_stack
from tests.test_slice import _events, run_cat_slice


class CountingModel:
    """The offline model, counting the task steps it answers (one per model call).
    `plans=False`: a model that never says a result is the answer (the flag dropped)."""

    def __init__(self, plans: bool = True) -> None:
        self.inner = OfflineModel()
        self.plans = plans
        self.task_steps: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.purpose == "task_step":
            self.task_steps.append(request)
        resp = await self.inner.complete(request)
        if not self.plans:
            for block in resp.content:
                if isinstance(block, ToolUseBlock):
                    block.input.pop("present_when_done", None)
        return resp


async def _replies(st: Stack, task_id: str) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in await _events(st)
        if e["type"] == "task.reply" and e["data"]["task_id"] == task_id
    ]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_lightweight_image_costs_one_model_call(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    model = CountingModel()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=model
    ) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        replies = await _replies(st, task["task_id"])
    # One inference: it plans the generation; the result needs no second one.
    assert len(model.task_steps) == 1, [r.messages[-1] for r in model.task_steps]
    # What is being made is said with the plan; the result is named, in the person's
    # language, exactly once, by the runtime.
    making = "I'm making the image “Generate an image of a red tabby cat”; it will appear here"
    assert replies[0]["text"].startswith(making)
    assert [r["text"] for r in replies[1:]] == [
        "Here is your image “Generate an image of a red tabby cat”."
    ]
    assert replies[1]["object_ids"] == task["artifacts"] and replies[1]["by"] == "runtime"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_without_the_plans_word_the_model_is_woken(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    """The same request from a model that does not mark the result as the answer: the
    runtime decides nothing for it (three calls: the plan, the submit's acknowledgement,
    and the reply after the job)."""
    model = CountingModel(plans=False)
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=model
    ) as st:
        task = await run_cat_slice(st, "Generate an image of a red tabby cat")
        replies = await _replies(st, task["task_id"])
    assert len(model.task_steps) == 3
    assert replies[-1]["text"].startswith("Here is your image") and "by" not in replies[-1]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_failed_job_wakes_the_model(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    model = CountingModel()
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=model
    ) as st:
        r = await st.sim.post("/sim/faults", json={"fail_rate": 1.0})
        assert r.status_code == 200
        r = await st.api.post(
            "/v1/messages", json={"text": "Generiere ein Bild einer Katze"}, headers=st.auth
        )
        mid = r.json()["message_id"]

        async def ended() -> Any:
            m = (await st.api.get(f"/v1/messages/{mid}", headers=st.auth)).json()
            tid = m["routing"].get("task_id")
            if not tid:
                return None
            t = (await st.api.get(f"/v1/tasks/{tid}", headers=st.auth)).json()
            return t if t["status"] in ("completed", "failed", "stopped") else None

        task = await eventually(ended, within=60)
        replies = await _replies(st, task["task_id"])
    # The failure is a decision for the model: it is woken and says so.
    assert len(model.task_steps) == 2
    assert replies[0]["text"].startswith("Ich mache das Bild")
    assert [r["text"] for r in replies[1:]] == [
        "Das Bild „Generiere ein Bild einer Katze“ ging nicht: simulated failure (fail_rate)."
    ]
    assert task["artifacts"] == []

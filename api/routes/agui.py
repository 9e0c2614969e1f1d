"""AG-UI: the agent's runs for AG-UI clients (CopilotKit, assistant-ui, `@ag-ui/client`)."""

from __future__ import annotations

from typing import Any

from ag_ui.core import RunAgentInput
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from api.deps import ChannelDep, CurrentUser, HandoffDep, SettingsDep, StreamsDep
from api.routes.events import STREAM_RETRY_SECONDS, LeasedStream
from api.services import agui
from lomo.errors import RateLimited

router = APIRouter(prefix="/v1", tags=["ag-ui"])
AGUI_SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "AG-UI events as server-sent events (`data:` one event as JSON)",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


@router.post("/ag-ui", response_class=StreamingResponse, responses=AGUI_SSE)
async def run(
    body: RunAgentInput,
    user: CurrentUser,
    channel: ChannelDep,
    state: HandoffDep,
    settings: SettingsDep,
    slots: StreamsDep,
) -> StreamingResponse:
    """`threadId` "main" sends the last user message through the unified entry (routed as
    `POST /v1/messages`); a task id sends it to that task. `resume` answers the interrupts
    (cards) of the last run under the rules of `POST /v1/cards/{id}/actions`. The stream
    carries the run until its turn ends; the same input again (same `runId`) tells it
    again from the start, sending nothing twice."""
    if not slots.acquire(user.id):
        raise RateLimited(
            f"{slots.per_person} event streams are open for this person; close one first",
            retry_after_seconds=STREAM_RETRY_SECONDS,
        )
    try:
        started = await agui.begin(state, user, channel, body)
    except BaseException:
        slots.release(user.id)
        raise
    events = agui.stream(state, user.id, started, settings.sse_poll_seconds)
    return LeasedStream(events, lambda: slots.release(user.id))

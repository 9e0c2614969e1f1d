"""The guide of a medium is in the context of the step that plans paid work in it (the rule
the system text states), for every medium of the catalogue: the offline model plans a
multi-part request through the real activities, and the step whose calls ask the plan's
price must have that medium's guide loaded, as `GET /v1/tasks/{id}/context` shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from temporalio.client import Client

from api.app import create_app
from llm.types import ModelRequest, ModelResponse
from money.catalogue import CATALOGUE
from standin.model import OfflineModel
from tests.context_support import context_run
from tests.helpers import ThreadServer

# One multi-part request a medium, each planned with paid pieces in that medium.
PLANS = {
    "image": "Make me a series of retro-style brand posters",
    "video": "Make four short promo videos for our bakery",
    "audio": "Make four jingles for our radio campaign",
    "3d": "Make four figurines in 3D for our board game",
}
MAX_STEPS = 6


class Offline:
    """The offline model as the context run's policy: one turn, every step of it."""

    turn_len = MAX_STEPS + 1

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        return await OfflineModel().complete(request)


def test_every_medium_of_the_catalogue_has_a_request_here() -> None:
    assert {m.kind for m in CATALOGUE.values()} == set(PLANS)


def _asks_price(response: dict[str, Any]) -> bool:
    return any(b.get("name") == "request_budget" for b in response["content"])


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


@pytest.mark.parametrize("medium", sorted(PLANS))
async def test_the_planning_step_has_the_guide_of_its_medium(
    medium: str, db_url: str, tmp_path: Path
) -> None:
    async with context_run(db_url, tmp_path, Offline(), opening=PLANS[medium]) as run:  # type: ignore[arg-type]
        for n in range(MAX_STEPS):
            await run.step(n)
            steps = await run.steps()
            if _asks_price(steps[-1].response):
                break
        else:
            raise AssertionError(f"no step asked the plan's price: {steps[-1].response}")
        view = await _view(run)
    # The view shows the last step: the one that planned and asked the price.
    assert (view["turn"], view["step"]) == (steps[-1].turn, steps[-1].step)
    loaded = [g["name"] for g in view["loaded_guides"]]
    assert medium in loaded, loaded
    # The plan's drafts are paid too: pictures, or sketches in sound for a plan of audio only.
    assert ("audio" if medium == "audio" else "image") in loaded
    assert all(g["tokens"] > 0 for g in view["loaded_guides"])

"""Operators find parked tasks the way the Temporal Web UI does: through the search
attributes the workflow keeps current on every status change (`lomo tasks --stuck`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client

from cli.main import stuck_query
from standin.scripted import ScriptedProvider
from tests.helpers import eventually
from tests.runtime_support import ROOT, start_task, tool_use
from tests.stack import running_stack


async def test_stuck_tasks_are_found_by_search_attributes(
    tmp_path: Path, db_url: str, temporal_server: str, temporal_client: Client, task_queue: str
) -> None:
    ask = tool_use(
        "ask_person",
        {
            "kind": "select",
            "title": "Which one?",
            "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
        },
        "tu_ask",
    )
    provider = ScriptedProvider([ask])
    async with running_stack(
        tmp_path, db_url, temporal_server, temporal_client, task_queue, provider=provider
    ) as st:
        tid, handle = await start_task(
            temporal_client, st.db, task_queue, st.user_id, "Choose a style", kind="persistent"
        )

        async def parked() -> Any:
            desc = await handle.describe()
            attrs = {p.key.name: p.value for p in desc.typed_search_attributes}
            return attrs if attrs.get("LomoTaskStatus") == "waiting_user" else None

        attrs = await eventually(parked)
        assert attrs["LomoUserId"] == st.user_id and attrs["LomoTaskKind"] == "persistent"
        assert isinstance(attrs["LomoWaitingSince"], datetime)

        async def listed(minutes: str) -> str:
            env = {k: v for k, v in os.environ.items() if not k.startswith("LOMO_")}
            env["LOMO_TEMPORAL_ADDRESS"] = temporal_server
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "cli.main",
                "tasks",
                "--stuck",
                minutes,
                "--user",
                st.user_id,
                "--data-dir",
                str(tmp_path),
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = await proc.communicate()
            assert proc.returncode == 0, (proc.returncode, err.decode()[-2000:])
            return out.decode()

        # Visibility is eventually consistent: the parked task appears within moments.
        out = await eventually(lambda: _contains(listed("0"), f"task:{tid}"), within=30)
        assert "waiting_user" in out
        assert f"task:{tid}" not in await listed("60")  # not parked for an hour yet


async def _contains(out: Any, needle: str) -> str | None:
    text = str(await out)
    return text if needle in text else None


def test_stuck_query_is_what_an_operator_types() -> None:
    q = stuck_query(10, "usr_1", datetime(2026, 12, 2, 12, 0, tzinfo=UTC))
    assert 'LomoWaitingSince < "2026-12-02T11:50:00.000000Z"' in q
    assert 'LomoTaskStatus IN ("waiting_generation", "waiting_user", "paused")' in q
    assert q.endswith('LomoUserId = "usr_1"')

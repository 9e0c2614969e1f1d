"""The installed package runs what the tests run: the wheel built from this tree, installed
into a fresh virtual environment outside it (only the lock's pins), starts the whole stack
with `lomo up` and completes a picture task; `lomo replay` replays it from that install."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import free_port
from tests.up_support import start_up, stop_up, until, up_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).parent / "uv"
# In the wheel for a reason each (docs/deploy.md, "What the package holds"), but never
# loaded by a production process: the api, the worker, the memory service, the simulator.
TEST_ONLY = ("standin.server", "standin.sse", "standin.scripted", "standin.eval", "scenarios")


@dataclass(frozen=True)
class Install:
    wheel: Path
    venv: Path

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def source_packages() -> set[str]:
    """Every top-level folder of the tree with an __init__.py, the tests aside."""
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    return found - {"tests"}


def wheel_packages(wheel: Path) -> set[str]:
    names = zipfile.ZipFile(wheel).namelist()
    return {n.split("/")[0] for n in names if re.fullmatch(r"[^/]+/__init__\.py", n)}


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _outside_env(**extra: str) -> dict[str, str]:
    """The environment of a person's shell: nothing points into the checkout."""
    env = up_env(**extra)
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Install:
    base = tmp_path_factory.mktemp("package")
    dist = base / "dist"
    # The sdist first and the wheel from it, as an index would: a file the sdist forgets is
    # missing from the wheel too.
    _run(UV, "build", "-q", "--sdist", "--wheel", "-o", dist, ROOT, cwd=base)
    (wheel,) = dist.glob("lomo-*.whl")
    constraints = base / "constraints.txt"
    _run(UV, "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project",
         "--project", ROOT, "-q", "-o", constraints, cwd=base)  # fmt: skip
    venv = base / "venv"
    _run(UV, "venv", "-q", "--python", sys.executable, venv, cwd=base)
    _run(UV, "pip", "install", "-q", "--python", venv / "bin" / "python", "-c", constraints,
         wheel, cwd=base)  # fmt: skip
    return Install(wheel, venv)


def test_the_wheel_holds_every_package_of_the_tree(installed: Install) -> None:
    shipped = wheel_packages(installed.wheel)
    assert shipped == source_packages(), shipped ^ source_packages()
    assert "nudges" in shipped and "tests" not in shipped
    # The import contracts and the type check cover the same packages.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(config["tool"]["importlinter"]["root_packages"]) == shipped
    typecheck = re.search(r"^typecheck:.*\n\t\S*mypy (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert typecheck and set(typecheck.group(1).split()) == shipped
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert "lomo/db/migrations/env.py" in names
    assert any(n.startswith("lomo/db/migrations/versions/0001_") for n in names)
    assert "web/node_modules/three/build/three.module.js" in names
    assert "web/static/index.html" in names
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n]


def test_production_processes_load_no_test_helpers(installed: Install, tmp_path: Path) -> None:
    """What `lomo api`, `lomo worker`, `lomo memory` and `lomo sim` import, from the install."""
    probe = (
        "import json, sys\n"
        "import api.app, cli.worker, cli.memory_service, sim.server\n"
        "from activities.registry import build_activities\n"
        "print(json.dumps({'api': api.app.__file__, 'modules': sorted(sys.modules)}))\n"
    )
    out = json.loads(_run(installed.bin("python"), "-c", probe, cwd=tmp_path, env=_outside_env()))
    assert Path(out["api"]).is_relative_to(installed.venv), out["api"]
    loaded = [m for m in out["modules"] if m.startswith(TEST_ONLY)]
    assert loaded == []


def _picture_task(api: httpx.Client) -> dict[str, Any]:
    r = api.post("/v1/messages", json={"text": "Generate an image of a red tabby cat"})
    assert r.status_code == 202, r.text
    mid = r.json()["message_id"]

    def completed() -> dict[str, Any] | None:
        tid = api.get(f"/v1/messages/{mid}").json()["routing"].get("task_id")
        task: dict[str, Any] = api.get(f"/v1/tasks/{tid}").json() if tid else {}
        return task if task.get("status") == "completed" and task.get("artifacts") else None

    task: dict[str, Any] = until(completed, 120, "the picture task completes")
    return task


def test_the_installed_stack_completes_a_picture_task(installed: Install, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = _outside_env(LOMO_WORKER_METRICS_PORT=str(free_port()))
    lomo = [installed.bin("lomo")]
    proc, stack = start_up(data_dir, env, command=lomo, cwd=tmp_path, within=180)
    try:
        assert set(stack["pids"]) == {"temporal", "memory", "worker", "api", "sim"}
        auth = {"Authorization": f"Bearer {stack['demo_token']}"}
        with httpx.Client(base_url=stack["api_url"], headers=auth, timeout=30) as api:
            task = _picture_task(api)
            blob = api.get(f"/v1/objects/{task['artifacts'][0]}/blob").content
            assert blob.startswith(b"\x89PNG")
            three = api.get("/static/vendor/three/build/three.module.js")
            assert three.status_code == 200 and "three" in three.text[:2000].lower()
        replay_env = dict(env, LOMO_DATA_DIR=str(data_dir))
        out = _run(*lomo, "replay", f"task:{task['task_id']}", cwd=tmp_path, env=replay_env)
        assert out.strip().endswith("replay ok")
        # The image's health check, part by part (the memory service on LOMO_MEMORY_PORT).
        for part in ("api", "worker", "memory", "sim"):
            said = _run(*lomo, "health", part, cwd=tmp_path, env=env)
            assert said.strip().endswith(": 200"), said
    finally:
        stop_up(proc, stack)
    down = subprocess.run([*lomo, "health", "api"], env=env, capture_output=True, text=True)
    assert down.returncode == 1, down.stdout


def test_checkout_commands_run_from_anywhere(tmp_path: Path) -> None:
    """The checkout's own `lomo` finds every package from any directory, and the LoCoMo
    bench starts as its docs say."""
    history = ROOT / "tests" / "histories" / "task_cancel_on_change.json"
    lomo = ROOT / ".venv" / "bin" / "lomo"
    out = _run(lomo, "replay", "--file", history, cwd=tmp_path, env=_outside_env())
    assert out.strip().endswith("replay ok")
    out = _run(ROOT / ".venv" / "bin" / "python", "bench/memory_locomo.py", "--help", cwd=ROOT)
    assert "--data" in out

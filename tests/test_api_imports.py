"""The api talks to workflows through their contracts (lomo/contracts/): loading it loads
no workflow, activity, tool, stand-in model or context code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Packages the api must not load: the workflows' code (their contracts are in lomo), the
# activities, the model's tools, the offline model and the context builder.
APART = ("workflows", "activities", "tools", "standin", "context")


def _loaded_by_api() -> list[str]:
    """The modules `import api.app` loads, in a fresh interpreter."""
    code = "import json, sys, api.app; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def loaded() -> list[str]:
    return _loaded_by_api()


@pytest.mark.parametrize("package", APART)
def test_the_api_loads_no_code_of(loaded: list[str], package: str) -> None:
    assert [m for m in loaded if m == package or m.startswith(f"{package}.")] == []


def test_the_api_loads_the_workflow_contracts(loaded: list[str]) -> None:
    assert {"lomo.contracts.task", "lomo.contracts.main_thread"} <= set(loaded)

"""The import-direction check (tools/check_layers.py): the tree passes, and a new upward,
sideways or lazy import in a copy of it is refused with the offending line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tools.check_layers import LAYERS, check

ROOT = Path(__file__).resolve().parents[1]
TOPS = sorted({p.split(".")[0] for p in LAYERS})


def _copy(tmp: Path) -> Path:
    for top in TOPS:
        shutil.copytree(ROOT / top, tmp / top, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def test_the_tree_keeps_the_layers() -> None:
    assert check(ROOT) == []


@pytest.mark.parametrize(
    ("path", "line", "why"),
    [
        ("lomo/ids.py", "from money.policy import authorize", "upward"),
        ("money/views.py", "import api.app", "upward"),
        ("routing/types.py", "from memory import models", "siblings"),
        ("workspace/diff.py", "def f():\n    from llm.standin.model import OfflineModel", "upward"),
        ("llm/types.py", "from lomo.settings import Settings\nimport routing.text", "upward"),
        ("sim/render.py", "from money.catalogue import CATALOGUE", "stands apart"),
        ("api/deps.py", "from sim.app import create_app", "only the CLI"),
    ],
)
def test_a_new_import_against_the_layers_is_refused(
    tmp_path: Path, path: str, line: str, why: str
) -> None:
    root = _copy(tmp_path)
    with (root / path).open("a") as f:
        f.write("\n" + line + "\n")
    found = check(root)
    assert len(found) == 1, found
    assert str(found[0].path) == path and why in found[0].why
    # The script as `make lint` runs it exits non-zero and names the line.
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_layers.py"), str(root)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and path in run.stdout


def test_downward_imports_pass(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    with (root / "api" / "deps.py").open("a") as f:
        f.write("\nimport money.policy\nfrom workflows import types\nimport lomo.ids\n")
    assert check(root) == []

"""The import contracts (`[tool.importlinter]` in pyproject.toml, run by `make lint`): the
tree keeps them, and a copy of it with one import against them is refused, naming it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
ROOTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
    "root_packages"
]


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _copy(tmp: Path) -> Path:
    """The root packages' Python files and the configuration (lint-imports reads the
    pyproject.toml of, and imports the packages from, its working directory)."""

    def others(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n == "__pycache__" or (not n.endswith(".py") and not Path(folder, n).is_dir())
        ]

    for top in ROOTS:
        shutil.copytree(ROOT / top, tmp / top, ignore=others)
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    return tmp


def test_the_tree_keeps_the_contracts() -> None:
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_an_unchanged_copy_keeps_them(tmp_path: Path) -> None:
    run = _lint(_copy(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("path", "line", "contract"),
    [
        ("lomo/_probe.py", "import api", "Imports point down the layers"),
        ("llm/_probe.py", "def f():\n    from standin.model import OfflineModel", "the layers"),
        ("tools/_probe.py", "from workflows.types import StatusInput", "the layers"),
        # The rooms: below the one that uses them, never beside or above it.
        ("money/_probe.py", "from routing.text import detect_language", "the layers"),
        ("money/_probe.py", "from workspace.store import get_object", "the layers"),
        ("cards/_probe.py", "from tasks.lifecycle import create_task", "the layers"),
        ("api/_probe.py", "from tools.checklist import checklist_tools", "agent step"),
        ("api/_probe.py", "from workflows.task import TaskWorkflow", "by their contracts"),
        ("standin/_probe.py", "from context.types import StepData", "agent step"),
        ("sim/_probe.py", "from money.catalogue import CATALOGUE", "only the kernel"),
        ("web/_probe.py", "import lomo.ids", "imports nothing of ours"),
        ("api/_probe.py", "import sim.app", "Only the CLI"),
    ],
)
def test_an_import_against_the_contracts_is_refused(
    tmp_path: Path, path: str, line: str, contract: str
) -> None:
    root = _copy(tmp_path)
    (root / path).write_text(line + "\n")
    run = _lint(root)
    assert run.returncode == 1, run.stdout + run.stderr
    broken = [x for x in run.stdout.splitlines() if " BROKEN" in x]
    assert len(broken) == 1 and contract in broken[0], run.stdout
    probe = path.removesuffix(".py").replace("/", ".")
    assert re.search(rf"^-\s+{re.escape(probe)} -> ", run.stdout, re.M), run.stdout

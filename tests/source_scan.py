"""The project's own Python files as text, for tests that read code rather than run it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sources(*packages: str) -> Iterator[tuple[str, str]]:
    """(path from the project root, text) of every .py file under `packages`, sorted."""
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield str(path.relative_to(ROOT)), path.read_text()

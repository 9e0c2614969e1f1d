"""The test-only simulated clock (lomo/clock.py): the offset in LOMO_TEST_CLOCK_FILE moves
every timestamp the platform records, and without the file the clock is real time."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lomo import clock
from lomo.db.models import utcnow
from lomo.settings import get_settings
from money import policy


@pytest.fixture
def clock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "clock"
    monkeypatch.setenv("LOMO_TEST_CLOCK_FILE", str(path))
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


def test_offset_moves_every_platform_clock(clock_file: Path) -> None:
    assert abs(clock.now() - datetime.now(UTC)) < timedelta(seconds=5)  # no file: real time
    clock_file.write_text(str(3 * 86400))
    for read in (clock.now, utcnow, policy.now):
        ahead = read() - datetime.now(UTC)
        assert timedelta(days=3) - timedelta(seconds=5) < ahead <= timedelta(days=3)
    clock_file.write_text("not a number")  # a half-written file is real time, not a crash
    assert abs(clock.now() - datetime.now(UTC)) < timedelta(seconds=5)

"""Imports every module that defines tables, so Base.metadata is complete (Alembic, tests)."""

from __future__ import annotations

import lomo.money.models
import lomo.routing.models  # noqa: F401
import memory.models  # noqa: F401
import workspace.models  # noqa: F401
from lomo.db.models import Base

__all__ = ["Base"]

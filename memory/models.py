"""memory tables (owned by the memory issue)."""

from __future__ import annotations

"""workspace tables (owned by the workspace issue)."""

from __future__ import annotations

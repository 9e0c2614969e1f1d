"""money tables."""

from __future__ import annotations

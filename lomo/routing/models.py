"""routing tables."""

from __future__ import annotations

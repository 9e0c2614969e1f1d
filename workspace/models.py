"""Workspace tables: objects, their versions and which tasks reference which object are
`WorkObject`, `ObjectVersion` and `TaskObject` in lomo/db/models.py; none are defined here."""

from __future__ import annotations

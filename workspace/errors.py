"""The workspace's refusals, each a kind of the kernel's errors (so the API maps them)."""

from __future__ import annotations

from lomo.errors import Conflict, InvalidInput, NotFound


class VersionConflict(Conflict):
    """A write based on a version that is no longer the current one."""

    code = "version_conflict"


class EditRefused(Conflict):
    """A snippet edit that does not apply (not found, not unique, overlapping)."""

    code = "edit_refused"


class NodeConflict(Conflict):
    """A flow edit naming nodes that someone else changed since the base version."""

    code = "node_conflict"


class Deleted(NotFound):
    """The object existed and was deleted by the person (irreversible)."""

    code = "deleted"


class NotAPicture(InvalidInput):
    """Bytes that no picture decoder reads (or a picture too large to open safely)."""

    code = "not_a_picture"

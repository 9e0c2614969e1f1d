"""Routing (docs/architecture.md#routing): the task index, deterministic targets, the
router's request."""

"""Routing (issue 4): the task index, deterministic targets, the router's request."""

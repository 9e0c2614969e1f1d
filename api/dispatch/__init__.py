"""The api's Temporal clients: starting workflows and sending them signals and updates.
No HTTP and no database here; services call these once what they hand over is stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio.client import Client

# The api's lazy client: connects on first use, so the api stores a message (and answers
# /healthz) while Temporal is still down.
TemporalGetter = Callable[[], Awaitable[Client]]

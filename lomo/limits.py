"""Limits the whole platform shares, so each room enforces the same figure."""

from __future__ import annotations

# Nodes in one flow, checked when a flow is saved and when a run starts or re-reads it.
# A flow run is one Temporal workflow whose history grows with its nodes: the recorded
# ten-clip film (tests/histories/flow_film.json) takes about 21 events and 12 KB of history
# per node. 200 nodes come to about 4,200 events and 2.5 MB: under Temporal's warning marks
# (10,240 events, 10 MB) and a tenth of its hard limits (51,200 events, 50 MB), leaving room
# for the polls of slow jobs and the re-reads of a price card left open.
MAX_FLOW_NODES = 200

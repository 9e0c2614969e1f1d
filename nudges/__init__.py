"""Nudges: reminding the person of a card that waits or work that is finished, within
their quiet hours and per-task wishes, backing off while they do not answer
(docs/architecture.md#nudges)."""

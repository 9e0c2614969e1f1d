"""Lomo's shared kernel: settings, the database, the event log and its bell, cards, ids,
errors, auth, the clock, callback signing, telemetry, heartbeats, the colour vocabulary
and the Temporal connection; every other package may import it."""

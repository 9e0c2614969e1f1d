"""Temporal activities: all I/O of the runtime. Temporal owns retries."""

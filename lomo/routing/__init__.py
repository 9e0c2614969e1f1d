"""routing (owned by the routing issue)."""

"""money (owned by the money issue)."""

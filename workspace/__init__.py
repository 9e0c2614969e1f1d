"""The shared workspace: versioned objects that person and agent both edit (ARCHITECTURE §7)."""

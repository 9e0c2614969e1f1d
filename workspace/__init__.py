"""The shared workspace: versioned objects that person and agent both edit
(docs/architecture.md#workspace)."""

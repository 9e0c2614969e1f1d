"""The memory service: evidence, versioned memories with provenance, extraction, correction,
the forget cascade and retrieval for contexts (docs/architecture.md#memory)."""

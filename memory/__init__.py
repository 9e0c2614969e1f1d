"""The memory service (ARCHITECTURE §6). Not built yet: see issue 7."""

"""Temporal workflows: deterministic code only (ARCHITECTURE §4)."""

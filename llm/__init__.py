"""The model layer: one provider interface, three implementations (see providers.py)."""

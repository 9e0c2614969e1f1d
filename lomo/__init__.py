"""Lomo's shared kernel: settings, database, ids, errors, model layer, CLI."""

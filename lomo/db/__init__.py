"""SQL persistence: models, engine/session factory, migrations."""

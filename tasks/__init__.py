"""Tasks (docs/architecture.md#rooms): a task row's life outside its workflow: creating it
with its event, promoting it, reopening it, and the rules on which statuses take what."""

"""The agent step's storage: the journal of a task's steps, planned calls and processed
messages, read for a step and written with its decision."""

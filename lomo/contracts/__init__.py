"""What the api, the workflows and the activities agree on about each workflow: its type
name, the names of its updates, signals and queries, and their input and output data.

Pure data and names: nothing here runs a workflow or an activity, so the api can start
and talk to workflows through the Temporal client without importing their code, and
activities can share a dataclass with a workflow without depending on it.
"""

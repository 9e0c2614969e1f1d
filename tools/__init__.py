"""The tools the model can call: each a `Tool` (tools/base.py) with a spec, a domain that
loads it and a `run` that the runtime's journaled dispatcher calls under the call's id."""

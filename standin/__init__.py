"""Stand-ins for the model: `OfflineModel`, deterministic rules that drive the real runtime
without a key (model.py and a module per purpose); `ScriptedProvider`, which answers tests
from a script; and a local server speaking the subset of Anthropic's Messages API that Lomo
uses, for the real SDK to call. The rules read the prompt formats of the domain rooms, so
this room sits above them; only the worker's assembly (activities/registry.py), tests and
benches import it."""

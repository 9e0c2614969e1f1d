"""The scenario harness (`lomo scenarios`): a simulated person drives the real embedded
stack over HTTP through whole multi-day stories, and the figures
(docs/testing.md#the-scenario-harness) are computed from what the stack recorded. It sits
on top like the CLI and imports only the kernel and httpx."""

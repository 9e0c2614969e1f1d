"""Routing (docs/architecture.md#routing): where a person's message goes. `route` runs the
semantic routing, `decide` carries out a decision (create, deliver, promote, clarify,
move), `policy` holds the rules on the target task, `plans` the plan and its record;
`deterministic` settles explicit targets, `index` the task index, `prompt` the router's
request."""

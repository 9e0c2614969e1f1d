"""The execution checklist (docs/architecture.md#turns-the-checklist-and-the-stop-check):
persisted, owned by the runtime, changed by the model only through a validated change
(`change`): no silent deletion of done steps, no step marked done without evidence, a
confirmation step done only by the person's answer (`decisions`). `items` reads it."""

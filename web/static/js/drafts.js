// Replies as they are written: `reply.delta` events build a draft per step; a retried
// attempt's text replaces the partial text before it (the offset tells a repeated piece
// from a new one); the step's `task.reply` (the final text) ends its draft.
export class Drafts {
  constructor() { this.byStep = new Map(); }

  // true when what is shown changed
  apply(type, d) {
    const key = `${d.task_id}|${d.turn}|${d.step}`;
    if (type === "task.reply") return this.byStep.delete(key);
    if (type !== "reply.delta") return false;
    const draft = this.byStep.get(key) || { taskId: d.task_id, attempt: 0, text: "" };
    if (d.attempt > draft.attempt) Object.assign(draft, { attempt: d.attempt, text: "" });
    if (d.attempt !== draft.attempt || d.offset !== draft.text.length) return false;
    draft.text += d.text;
    this.byStep.set(key, draft);
    return true;
  }

  list() { return [...this.byStep.values()]; }
}

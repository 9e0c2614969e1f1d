// Each of the person's messages inside a task: a small mark of where it stands (received,
// read, withdrawn, moved) that the event stream keeps current, a "Move" action that sends
// it to another task, and "Withdraw" while its task has not read it (docs/api.md).
import { api, apiAll } from "./api.js";
import { h, labelled, replace } from "./dom.js";
import { LANG } from "./i18n.js";

const WORDS = {
  en: {
    sent: "sent", received: "received", read: "read", withdrawn: "withdrawn", moved: "moved",
    state: "Message state: {state}",
    move: "Move", move_label: "Move this message to another task", move_to: "Move to task",
    move_go: "Move here", cancel: "Cancel", no_other: "There is no other task to move it to.",
    withdraw: "Withdraw", withdraw_label: "Withdraw this message before its task reads it",
    moved_to: "moved to {goal}",
  },
  de: {
    sent: "gesendet", received: "empfangen", read: "gelesen", withdrawn: "zurückgezogen", moved: "verschoben",
    state: "Stand der Nachricht: {state}",
    move: "Verschieben", move_label: "Diese Nachricht in eine andere Aufgabe verschieben", move_to: "In Aufgabe verschieben",
    move_go: "Hierhin verschieben", cancel: "Abbrechen", no_other: "Es gibt keine andere Aufgabe dafür.",
    withdraw: "Zurückziehen", withdraw_label: "Diese Nachricht zurückziehen, bevor die Aufgabe sie liest",
    moved_to: "verschoben nach {goal}",
  },
};
const w = (key, vars = {}) => (WORDS[LANG] || WORDS.en)[key].replace(/\{(\w+)\}/g, (_, k) => vars[k] ?? "");
const UNREAD = ["sent", "received"];
// An event's effect on its message's state; a later state never goes back to an earlier one.
const ORDER = ["sent", "received", "read", "withdrawn", "moved"];
const EVENT_STATE = { "message.delivered": "received", "message.read": "read", "message.withdrawn": "withdrawn", "message.moved": "moved" };

export class Marks {
  constructor({ report, changed, currentTask }) {
    this.report = report;
    this.changed = changed; // re-render the task's lines
    this.currentTask = currentTask;
    this.states = new Map(); // message_id -> state, from events newer than the lines
    this.movedTo = new Map(); // message_id -> task_id
    this.picking = null; // the message whose move picker is open
    this.pickerForm = null; // its form, kept across re-renders (its choice and focus stay)
  }

  // Whether the event changed a mark (the caller re-renders the task's lines then).
  apply(ev) {
    const d = ev.data || {};
    let state = EVENT_STATE[ev.type];
    if (ev.type === "message.routed" && d.task_id && d.decision !== "move") state = "received";
    if (!state || !d.message_id) return false;
    if (state === "moved" && d.to_task_id) this.movedTo.set(d.message_id, d.to_task_id);
    const before = this.states.get(d.message_id);
    if (before && ORDER.indexOf(before) >= ORDER.indexOf(state)) return false;
    this.states.set(d.message_id, state);
    return true;
  }

  stateOf(item) {
    const live = this.states.get(item.message_id);
    const listed = item.state || "sent";
    return live && ORDER.indexOf(live) > ORDER.indexOf(listed) ? live : listed;
  }

  // The person's line in the task: its words, its mark, its actions.
  line(item) {
    const state = this.stateOf(item);
    const li = h("li", { class: `person state-${state}`, dataset: { messageId: item.message_id, state } },
      h("span", { class: "said" }, item.text || ""), " ",
      h("span", { class: `mark mark-${state}`, role: "status", "aria-label": w("state", { state: w(state) }) }, w(state)));
    if (state === "moved" || state === "withdrawn") return li;
    const actions = h("span", { class: "msg-actions" },
      h("button", { type: "button", class: "link move", "aria-label": w("move_label"), "aria-expanded": String(this.picking === item.message_id),
        dataset: { keep: `move:${item.message_id}` },
        onclick: () => this.togglePicker(item.message_id) }, w("move")),
      UNREAD.includes(state)
        ? h("button", { type: "button", class: "link withdraw", "aria-label": w("withdraw_label"), dataset: { keep: `withdraw:${item.message_id}` },
          onclick: () => this.withdraw(item.message_id) }, w("withdraw"))
        : null);
    li.append(" ", actions);
    if (this.picking === item.message_id) li.append(this.pickerForm ||= this.picker(item.message_id));
    return li;
  }

  togglePicker(messageId) {
    this.picking = this.picking === messageId ? null : messageId;
    this.pickerForm = null;
    this.changed();
    if (this.picking) setTimeout(() => document.querySelector(".move-picker select")?.focus(), 0);
  }

  // The other tasks to pick from, filled in once they are fetched.
  picker(messageId) {
    const select = h("select", { name: "move_to", dataset: { keep: `move-to:${messageId}` } });
    const go = h("button", { type: "submit", class: "primary", dataset: { keep: `move-go:${messageId}` } }, w("move_go"));
    const form = h("form", { class: "move-picker", onsubmit: (e) => { e.preventDefault(); this.move(messageId, select.value); } },
      labelled(w("move_to"), select), go,
      h("button", { type: "button", dataset: { keep: `move-cancel:${messageId}` }, onclick: () => this.togglePicker(messageId) }, w("cancel")));
    apiAll("/v1/tasks?include_lightweight=true", "tasks").then((tasks) => {
      const others = tasks.filter((x) => x.task_id !== this.currentTask() && x.status !== "archived");
      replace(select, others.map((x) => h("option", { value: x.task_id }, x.goal || x.task_id)));
      if (!others.length) { go.disabled = true; form.append(h("p", { class: "muted" }, w("no_other"))); }
    }).catch(this.report);
    return form;
  }

  async move(messageId, taskId) {
    if (!taskId) return;
    try {
      const m = await api(`/v1/messages/${messageId}/move`, { method: "POST", body: { task_id: taskId } });
      this.states.set(messageId, m.state);
    } catch (e) { this.report(e); }
    this.picking = null;
    this.pickerForm = null;
    this.changed();
  }

  async withdraw(messageId) {
    try {
      const m = await api(`/v1/messages/${messageId}`, { method: "DELETE" });
      this.states.set(messageId, m.state);
    } catch (e) {
      if (e.body?.state) this.states.set(messageId, e.body.state); // read (or moved) meanwhile
      this.report(e);
    }
    this.changed();
  }
}

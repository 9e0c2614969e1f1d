// The creative app: one entry box (no sessions, no task to choose first), the tasks with
// live status, the questions waiting for the person, the workspace, budget and memory.
import { api, apiAll, auth, checkToken, streamEvents, whenUnauthorized } from "./api.js";
import { startAttention } from "./attention.js";
import { renderCard } from "./cards.js";
import { debounce, enterSends, h, keepFocus, labelled, replace } from "./dom.js";
import { Drafts } from "./drafts.js";
import { LANG, t } from "./i18n.js";
import { Marks } from "./marks.js";
import { renderBudget, renderMemory } from "./panels.js";
import { renderTask, renderTaskList, replyForm } from "./tasks.js";
import { topUpControl } from "./topup.js";
import { Workspace } from "./workspace.js";

const root = document.getElementById("root");
document.documentElement.lang = LANG;
document.title = t("title");
// Every event the page received, in order: the reconnect test compares it with the log.
window.__lomo = { seqs: [], connected: false };

function login(message) {
  const input = h("input", { type: "password", name: "token", autocomplete: "off" });
  const err = h("p", { class: "msg error", role: "alert" }, message || "");
  if (!message) err.hidden = true;
  const submit = async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (token && (await checkToken(token))) { auth.set(token); start(); return; }
    err.hidden = false;
    err.textContent = t("login_bad");
  };
  replace(root, h("main", { class: "login" },
    h("h1", {}, t("title")), h("h2", {}, t("login_title")), h("p", { class: "muted" }, t("login_hint")),
    h("form", { onsubmit: submit }, labelled(t("login_token"), input), h("button", { class: "primary", type: "submit" }, t("login_submit"))),
    err));
  input.focus();
}

let stream = null;
whenUnauthorized(() => {
  stream?.stop();
  auth.clear();
  login(t("login_expired"));
});

async function start() {
  // messageTask: where this page's messages went (the thread's events do not say).
  const state = { selected: null, progress: new Map(), lastMessage: null, drafts: new Drafts(), messageTask: new Map() };
  const report = (e) => showError(e);
  const el = {
    entryResult: h("div", { class: "entry-result", role: "status" }),
    thread: h("div", { class: "thread" }),
    drafts: h("ul", { class: "drafts", "aria-live": "polite" }),
    tasks: h("div", { class: "task-list" }),
    cards: h("div", { class: "open-cards" }),
    task: h("div", { class: "task-body" }, h("p", { class: "muted" }, t("pick_task"))),
    taskThread: h("ul", { class: "task-thread thread" }),
    taskDrafts: h("ul", { class: "drafts task-drafts", "aria-live": "polite" }),
    budget: h("div", { class: "budget-panel" }),
    memory: h("div", { class: "memory-panel" }),
    workspace: h("div", { class: "workspace-panel" }),
    errors: h("div", { class: "errors", role: "alert" }),
    conn: h("span", { class: "conn" }),
  };
  const showError = (e) => replace(el.errors, h("div", { class: "msg error" }, t("error", { detail: e.message || e })));
  const entry = h("textarea", { name: "entry", rows: 3, placeholder: t("entry_placeholder") });
  enterSends(entry);
  const send = async (e) => {
    e.preventDefault();
    const text = entry.value.trim();
    if (!text) return;
    try {
      const r = await api("/v1/messages", { method: "POST", body: { text, client_message_id: crypto.randomUUID() } });
      entry.value = "";
      state.lastMessage = r.message_id;
      replace(el.entryResult, h("span", { class: "muted" }, t("routing")));
      showRouting();
    } catch (err) { report(err); }
  };
  const tabs = h("nav", { class: "tabs" });
  const panes = { workspace: el.workspace, memory: el.memory };
  for (const name of Object.keys(panes)) {
    tabs.append(h("button", { type: "button", dataset: { tab: name }, onclick: () => showTab(name) }, t(name)));
  }
  // Assigned below, once the panes exist; a click on the tab while the page still loads
  // (the upload limit is awaited first) shows the pane, and the first refresh fills it.
  let refreshMemory = () => {};
  const showTab = (name) => {
    for (const [n, pane] of Object.entries(panes)) pane.hidden = n !== name;
    for (const b of tabs.children) {
      b.classList.toggle("active", b.dataset.tab === name);
      b.setAttribute("aria-pressed", String(b.dataset.tab === name));
    }
    if (name === "memory") refreshMemory();
  };
  // The open task's reply box and its reply as it is written stay put while its view re-renders.
  const reply = replyForm(() => state.selected, {
    report,
    onSent: (messageId, taskId) => { state.messageTask.set(messageId, taskId); refreshTask(); },
  });
  reply.hidden = true;
  replace(root,
    h("header", {}, h("h1", {}, t("title")), el.budget, topUpControl({ report, onChange: () => renderBudget(el.budget).catch(report) }), el.conn, startAttention(report),
      h("button", { class: "link", onclick: () => { auth.clear(); stream?.stop(); login(); } }, t("logout"))),
    el.errors,
    h("main", { class: "layout" },
      h("section", { class: "col-left", "aria-label": t("entry_label") },
        h("form", { class: "entry", onsubmit: send }, labelled(t("entry_label"), entry, { class: "field sr-label" }),
          h("button", { class: "primary", type: "submit" }, t("send"))),
        el.entryResult,
        h("h2", { class: "section-title" }, t("tasks")), el.tasks,
        h("h2", { class: "section-title" }, t("thread")), el.thread, el.drafts),
      h("section", { class: "col-main", "aria-label": t("open_cards") }, h("h2", { class: "section-title" }, t("open_cards")), el.cards,
        h("div", { class: "task-detail" }, el.task, el.taskThread, el.taskDrafts, reply)),
      h("section", { class: "col-right", "aria-label": t("main_label") }, tabs, el.workspace, el.memory)));
  const workspace = new Workspace(el.workspace, { report, limitBytes: await uploadLimit() });
  showTab("workspace");

  const refreshTasks = debounce(async () => {
    try {
      const tasks = await apiAll("/v1/tasks?include_lightweight=true", "tasks");
      renderTaskList(el.tasks, tasks.filter((x) => x.status !== "archived"), state.selected, select, state.progress);
    } catch (e) { report(e); }
  }, 150);
  const refreshTask = debounce(async () => {
    if (!state.selected) return;
    try {
      await renderTask(el.task, state.selected, { refresh: refreshAll, report, progress: state.progress });
      reply.hidden = false;
    } catch (e) { report(e); }
  }, 150);
  const refreshCards = debounce(async () => {
    try {
      const cards = await apiAll("/v1/cards?status=open", "cards");
      const free = cards.filter((c) => !c.task_id || c.task_id !== state.selected);
      // The selected task's own questions stand in its card below; here the rest.
      const empty = cards.length ? t("none_elsewhere") : t("none_open");
      replace(el.cards, free.length ? free.map((c) => renderCard(c, refreshAll, report)) : h("p", { class: "muted" }, empty));
    } catch (e) { report(e); }
  }, 150);
  const thread = { after: 0, lines: [] };
  const refreshThread = debounce(async () => {
    try {
      // Only what is new since the last look, page by page; the last 30 lines are kept.
      let after = thread.after;
      while (after !== null) {
        const page = await api(`/v1/thread?after=${after}&limit=1000`);
        // A refresh still in flight may have taken these already: each seq once.
        const fresh = page.items.filter((i) => i.seq > thread.after);
        thread.lines.push(...fresh.filter((i) => i.type === "message.received" || i.type === "task.reply"));
        if (fresh.length) thread.after = fresh[fresh.length - 1].seq;
        after = page.next;
      }
      thread.lines = thread.lines.slice(-30);
      const lines = thread.lines;
      // A presented result names its assets: the line opens the task that shows them.
      const line = (i) => (i.object_ids && i.object_ids.length && i.task_id
        ? h("button", { class: "link result", dataset: { taskId: i.task_id }, onclick: () => select(i.task_id) }, i.text || "")
        : i.text || "");
      replace(el.thread, h("ul", {}, lines.map((i) =>
        h("li", { class: i.type === "task.reply" ? "agent" : "person" }, line(i)))));
      renderTaskThread();
    } catch (e) { report(e); }
  }, 150);
  const refreshBudget = debounce(() => renderBudget(el.budget).catch(report), 150);
  refreshMemory = debounce(() => { if (!el.memory.hidden) renderMemory(el.memory, { refresh: refreshAll, report }).catch(report); }, 150);
  const refreshWorkspace = debounce(() => workspace.refresh().catch(report), 150);
  function refreshAll() {
    refreshTasks(); refreshTask(); refreshCards(); refreshBudget(); refreshThread(); refreshMemory();
  }
  function select(taskId) {
    state.selected = taskId;
    refreshTasks(); refreshTask(); refreshCards(); renderTaskThread(); renderDrafts();
  }
  // The open task's own lines of the conversation, above its reply as it is written; the
  // person's lines carry their marks and actions (marks.js).
  const marks = new Marks({ report, changed: () => renderTaskThread(), currentTask: () => state.selected });
  function renderTaskThread() {
    const taskOf = (i) => i.task_id || state.messageTask.get(i.message_id);
    keepFocus(el.taskThread, () => replace(el.taskThread, thread.lines.filter((i) => taskOf(i) === state.selected).map((i) =>
      (i.type === "task.reply" ? h("li", { class: "agent" }, i.text || "") : marks.line(i)))));
  }

  // The routed event may come before the POST's answer: look again until it is routed.
  async function showRouting(tries = 0) {
    const id = state.lastMessage;
    if (!id) return;
    const m = await api(`/v1/messages/${id}`);
    const r = m.routing;
    if (r.status !== "routed") {
      if (tries < 120 && id === state.lastMessage) setTimeout(() => showRouting(tries + 1).catch(report), 1000);
      return;
    }
    if (r.decision === "clarify") {
      replace(el.entryResult, h("span", {}, t("asked_which")));
    } else if (r.task_id) {
      state.messageTask.set(id, r.task_id);
      const task = await api(`/v1/tasks/${r.task_id}`);
      replace(el.entryResult, h("button", { class: "link routed", dataset: { taskId: r.task_id }, onclick: () => select(r.task_id) },
        t("routed_to", { goal: task.goal || r.task_id })));
      select(r.task_id);
    } else {
      replace(el.entryResult, h("span", { class: "muted" }, t("answered")));
    }
  }

  const draftLine = (x) => h("li", { class: "agent streaming", dataset: { taskId: x.taskId } }, x.text);
  function renderDrafts() {
    const all = state.drafts.list();
    replace(el.drafts, all.map(draftLine));
    replace(el.taskDrafts, all.filter((x) => x.taskId === state.selected).map(draftLine));
  }
  const onEvent = (ev) => {
    window.__lomo.seqs.push(ev.seq);
    // Modules of their own (attention, the flow graph) follow the stream from here.
    document.dispatchEvent(new CustomEvent("lomo:event", { detail: ev }));
    const d = ev.data || {};
    if (state.drafts.apply(ev.type, d)) renderDrafts();
    if (ev.type === "reply.delta") return;
    if (ev.type.startsWith("generation.") && d.task_id) state.progress.set(d.task_id, d.progress ?? 0);
    if (ev.type === "message.routed" && d.message_id === state.lastMessage) showRouting().catch(report);
    if (ev.type.startsWith("message.") && marks.apply(ev)) renderTaskThread();
    // A new line of the person's (also a moved copy, in its new task) joins the thread.
    if (ev.type === "message.received" || ev.type === "message.moved") refreshThread();
    if (ev.type.startsWith("task.") || ev.type.startsWith("generation.")) { refreshTasks(); refreshThread(); if (!d.task_id || d.task_id === state.selected) refreshTask(); }
    if (ev.type.startsWith("card.")) { refreshCards(); refreshTask(); }
    if (ev.type === "budget.changed" || ev.type.startsWith("generation.")) refreshBudget();
    if (ev.type.startsWith("memory.")) refreshMemory();
    if (ev.type.startsWith("object.")) { refreshWorkspace(); workspace.changed(ev); }
  };
  const onState = (up) => {
    window.__lomo.connected = up;
    replace(el.conn, up ? null : h("span", { class: "msg warn" }, t("offline")));
    if (up) refreshAll();
  };
  stream = streamEvents(onEvent, onState);
  refreshAll();
  refreshWorkspace();
}

async function uploadLimit() {
  try { return (await api("/v1/session")).max_upload_bytes; } catch { return 50e6; }
}

// A token in the address fragment (`make up` prints such a link) signs in once and is
// taken out of the address bar; fragments never reach the server or its logs.
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) {
  const token = fragment.get("token");
  history.replaceState(null, "", location.pathname);
  checkToken(token).then((ok) => { if (ok) { auth.set(token); start(); } else login(t("login_bad")); });
} else if (auth.token) {
  checkToken(auth.token).then((ok) => (ok ? start() : (auth.clear(), login(t("login_expired")))));
} else {
  login();
}

// The task list (live status from SSE) and one task's card: goal, checklist with
// evidence, its questions, results shown inline, progress of running jobs, controls.
import { api } from "./api.js";
import { renderCard } from "./cards.js";
import { enterSends, h, keepFocus, labelled, replace } from "./dom.js";
import { t } from "./i18n.js";
import { renderMedia } from "./media.js";

export function statusBadge(status) {
  return h("span", { class: `badge status-${status}`, dataset: { status } }, t(`status_${status}`));
}

export function renderTaskList(el, tasks, selected, onSelect, progress) {
  if (!tasks.length) return replace(el, h("p", { class: "muted" }, t("no_tasks")));
  replace(el, h("ul", { class: "tasks" }, tasks.map((task) => {
    const p = progress.get(task.task_id);
    // The whole row takes a click; its button is the keyboard's way in (its click bubbles).
    return h("li", {
      class: task.task_id === selected ? "task selected" : "task",
      dataset: { taskId: task.task_id, status: task.status },
      onclick: () => onSelect(task.task_id),
    },
    h("button", { type: "button", class: "task-goal", "aria-current": task.task_id === selected ? "true" : null },
      task.goal || task.task_id),
    h("div", { class: "task-meta" }, statusBadge(task.status),
      task.status === "waiting_generation" && p !== undefined
        ? h("progress", { max: 1, value: p, "aria-label": t("progress", { p: Math.round(p * 100) }) }) : null,
      task.status === "stopped" && task.status_reason ? h("span", { class: "muted" }, task.status_reason) : null));
  })));
}

// A result as what it is (picture, player, 3D view), named by its title and kind.
export function renderArtifact(objectId) {
  return renderMedia(objectId);
}

export async function renderTask(el, taskId, { refresh, report, progress }) {
  const [task, budget] = await Promise.all([
    api(`/v1/tasks/${taskId}`),
    api(`/v1/tasks/${taskId}/budget`),
  ]);
  const control = async (what, body) => {
    try { await api(`/v1/tasks/${taskId}/${what}`, { method: "POST", body }); refresh(); } catch (e) { report(e); }
  };
  const closed = ["stopped", "completed", "failed", "archived"].includes(task.status);
  const p = progress.get(taskId);
  const autonomy = h("select", {
    name: "autonomy",
    onchange: (e) => control("autonomy", { level: e.target.value }),
  }, ["ask", "within_budget"].map((lvl) =>
    h("option", { value: lvl, selected: budget.autonomy === lvl }, t(`autonomy_${lvl}`))));
  const artifacts = h("div", { class: "artifacts" });
  keepFocus(el, () => replace(el,
    h("div", { class: "task-head" },
      h("h2", {}, task.goal || task.task_id),
      statusBadge(task.status),
      task.status_reason ? h("span", { class: "muted reason" }, t("reason", { reason: task.status_reason })) : null,
      task.status === "waiting_generation" && p !== undefined
        ? h("progress", { max: 1, value: p, "aria-label": t("progress", { p: Math.round(p * 100) }) }) : null),
    h("div", { class: "task-controls" },
      !closed && task.status !== "paused" ? h("button", { onclick: () => control("pause") }, t("pause")) : null,
      task.status === "paused" || (task.status === "stopped" && task.status_reason)
        ? h("button", { onclick: () => control("resume", {}) }, t("resume")) : null,
      !closed ? h("button", { onclick: () => control("stop") }, t("stop")) : null,
      h("label", {}, `${t("autonomy")}: `, autonomy)),
    task.checklist.length ? h("section", {},
      h("h3", {}, t("checklist")),
      h("ul", { class: "checklist" }, task.checklist.map((item) =>
        h("li", { class: `item item-${item.status}`, dataset: { status: item.status } },
          h("span", { class: "tick" }, item.status === "done" ? "✓" : "○"), " ", item.title,
          item.artifacts?.length ? h("span", { class: "muted" }, ` (${t("evidence")}: ${item.artifacts.length})`) : null,
          item.note ? h("span", { class: "muted" }, ` — ${item.note}`) : null)))) : null,
    task.cards.filter((c) => c.status === "open").map((c) => renderCard(c, refresh, report)),
    h("section", {}, h("h3", {}, t("artifacts")),
      task.artifacts.length ? artifacts : h("p", { class: "muted" }, t("no_artifacts")))));
  for (const id of task.artifacts) {
    renderArtifact(id).then((fig) => artifacts.append(fig)).catch(report);
  }
  return task;
}

// The reply box of the open task: it stays while the task's view re-renders around it, so
// what is being typed survives the live updates. Enter sends, Shift+Enter breaks the line.
export function replyForm(currentTask, { report, onSent }) {
  const area = h("textarea", { name: "reply", rows: 2 });
  enterSends(area);
  const status = h("p", { class: "muted reply-status", role: "status" });
  const send = async (e) => {
    e.preventDefault();
    const taskId = currentTask();
    const text = area.value.trim();
    if (!taskId || !text) return;
    try {
      const r = await api(`/v1/tasks/${taskId}/messages`, { method: "POST", body: { text, client_message_id: crypto.randomUUID() } });
      area.value = "";
      status.textContent = t("reply_sent");
      onSent(r.message_id, taskId);
    } catch (err) { report(err); }
  };
  return h("form", { class: "reply", onsubmit: send },
    labelled(t("reply"), area),
    h("button", { class: "primary", type: "submit" }, t("reply_send")), status);
}

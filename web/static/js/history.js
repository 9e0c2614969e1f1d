// A work object's versions: who made each and what changed, the lines a document (or a
// flow) changed since a version (the api's diff), an old asset version shown again, and
// Restore, which writes the chosen version as a new one on the version this list was
// read at: if the object changed meanwhile the write is refused, the page says so and
// reads the list again, so nothing newer is overwritten unseen.
import { ApiError, api, apiAll } from "./api.js";
import { h, replace } from "./dom.js";
import { LANG, addStrings, t } from "./i18n.js";
import { base64Of, kindOf, renderMedia } from "./media.js";

addStrings({
  en: {
    history: "History",
    history_of: "History of “{name}”",
    history_close: "Close history",
    history_by_you: "by you",
    history_by_agent: "by the agent",
    history_for_goal: "by the agent, working on “{goal}”",
    history_current: "current",
    history_compare: "Changes since this version",
    history_open: "Show this version",
    history_restore: "Restore this version",
    history_diff_title: "From version {from} to version {to}: {added} added, {removed} removed",
    history_same: "No line differs from version {from} to version {to}.",
    history_truncated: "More lines changed than are shown here.",
    history_added: "added",
    history_removed: "removed",
    history_restored: "Version {from} restored as version {version}.",
    history_conflict: "Not restored: “{name}” changed meanwhile (now version {current}). The history is shown again; restore again if you still want to.",
  },
  de: {
    history: "Verlauf",
    history_of: "Verlauf von „{name}“",
    history_close: "Verlauf schließen",
    history_by_you: "von dir",
    history_by_agent: "vom Agenten",
    history_for_goal: "vom Agenten, bei „{goal}“",
    history_current: "aktuell",
    history_compare: "Änderungen seit dieser Version",
    history_open: "Diese Version zeigen",
    history_restore: "Diese Version wiederherstellen",
    history_diff_title: "Von Version {from} zu Version {to}: {added} hinzugefügt, {removed} entfernt",
    history_same: "Keine Zeile unterscheidet sich zwischen Version {from} und {to}.",
    history_truncated: "Es haben sich mehr Zeilen geändert, als hier gezeigt werden.",
    history_added: "hinzugefügt",
    history_removed: "entfernt",
    history_restored: "Version {from} als Version {version} wiederhergestellt.",
    history_conflict: "Nicht wiederhergestellt: „{name}“ wurde inzwischen geändert (jetzt Version {current}). Der Verlauf ist neu geladen; stelle erneut wieder her, wenn du es noch willst.",
  },
});

function who(v) {
  if (v.created_by === "user") return t("history_by_you");
  return v.task_goal ? t("history_for_goal", { goal: v.task_goal }) : t("history_by_agent");
}

function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "" : d.toLocaleString(LANG, { dateStyle: "medium", timeStyle: "short" });
}

// One changed line: a mark and a word for it (read out), the line numbers, the text.
function diffLine(line) {
  const mark = { added: "+", removed: "−", equal: " " }[line.op];
  const word = line.op === "equal" ? null : h("span", { class: "sr-only" }, `${t(`history_${line.op}`)}: `);
  const text = h(line.op === "added" ? "ins" : line.op === "removed" ? "del" : "span", {}, line.text || " ");
  return h("li", { class: `diff-${line.op}`, dataset: { op: line.op } },
    h("span", { class: "mark", "aria-hidden": "true" }, mark),
    h("span", { class: "num", "aria-hidden": "true" }, line.old_line ?? ""),
    h("span", { class: "num", "aria-hidden": "true" }, line.new_line ?? ""),
    h("span", { class: "text" }, word, text));
}

function renderDiff(d) {
  const head = h("p", { class: "diff-head" }, t("history_diff_title", { from: d.from_version, to: d.to_version, added: d.added, removed: d.removed }));
  if (!d.hunks.length) return h("div", { class: "diff" }, h("p", {}, t("history_same", { from: d.from_version, to: d.to_version })));
  return h("div", { class: "diff", dataset: { from: d.from_version, to: d.to_version } }, head,
    d.hunks.map((hunk) => h("ol", { class: "hunk" }, hunk.map(diffLine))),
    d.truncated ? h("p", { class: "muted" }, t("history_truncated")) : null);
}

export class History {
  // `say(text, kind)` writes the workspace's status line; `changed()` refreshes its list.
  constructor(el, { say, changed, close }) {
    this.el = el;
    this.say = say;
    this.changed = changed;
    this.close = close;
  }

  async show(objectId) {
    const [obj, versions] = await Promise.all([
      api(`/v1/objects/${objectId}`),
      apiAll(`/v1/objects/${objectId}/versions`, "versions"),
    ]);
    // The version this list was read at: a restore is written on it, and refused if the
    // object moved on meanwhile.
    this.obj = obj;
    const detail = h("div", { class: "history-detail", "aria-live": "polite" });
    const title = h("h3", { class: "history-title", tabindex: "-1" }, t("history_of", { name: obj.name }));
    replace(this.el, h("section", { class: "history", dataset: { objectId, version: obj.version } },
      title,
      h("p", { class: "muted" }, kindOf(obj.type, obj.content?.media_type)),
      h("ol", { class: "versions", reversed: true }, versions.slice().reverse().map((v) => this.row(v, detail))),
      detail,
      h("button", { type: "button", onclick: () => this.close(objectId) }, t("history_close"))));
    title.focus();
  }

  row(v, detail) {
    const current = v.version === this.obj.version;
    const asset = this.obj.type === "asset";
    const action = (cls, label, fn) => h("button", { type: "button", class: cls, onclick: fn }, label);
    return h("li", { class: "version", dataset: { version: v.version } },
      h("div", {},
        h("strong", {}, t("version", { version: v.version })),
        current ? h("span", { class: "badge" }, t("history_current")) : null,
        h("span", { class: "muted" }, ` ${who(v)}, ${when(v.created_at)}`)),
      h("div", { class: "muted summary" }, v.summary),
      current ? null : h("div", { class: "version-actions" },
        asset
          ? action("open-version", t("history_open"), () => this.open(v.version, detail))
          : action("compare", t("history_compare"), () => this.compare(v.version, detail)),
        action("restore", t("history_restore"), () => this.restore(v.version))));
  }

  async compare(version, detail) {
    try {
      replace(detail, renderDiff(await api(`/v1/objects/${this.obj.object_id}/diff?from=${version}`)));
    } catch (e) { this.say(t("error", { detail: e.message }), "error"); }
  }

  async open(version, detail) {
    try { replace(detail, await renderMedia(this.obj.object_id, version)); } catch (e) {
      this.say(t("error", { detail: e.message }), "error");
    }
  }

  // The chosen version's content (an asset's: its bytes) written on the version shown.
  async restore(version) {
    const o = this.obj;
    try {
      const old = await api(`/v1/objects/${o.object_id}?version=${version}`);
      const content = o.type === "asset"
        ? { ...old.content, data_base64: await base64Of(o.object_id, version) }
        : old.content;
      const w = await api(`/v1/objects/${o.object_id}`, { method: "PUT", body: { base_version: o.version, content } });
      await this.show(o.object_id);
      this.say(t("history_restored", { from: version, version: w.version }), "ok");
      this.changed();
    } catch (e) {
      if (e instanceof ApiError && e.status === 409 && e.body.error === "version_conflict") {
        await this.show(o.object_id);
        this.say(t("history_conflict", { name: o.name, current: e.body.current_version }), "warn");
        return;
      }
      this.say(t("error", { detail: e.message }), "error");
    }
  }
}

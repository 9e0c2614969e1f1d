// Documents, flows and files of the shared workspace. A save names the version it is
// based on; a save on an old base shows the conflict with what changed and keeps the
// person's text, so nothing is ever overwritten silently.
import { ApiError, api, apiAll } from "./api.js";
import { h, replace } from "./dom.js";
import { FlowView } from "./flowgraph.js";
import { History } from "./history.js";
import { money, t } from "./i18n.js";
import { kindOf } from "./media.js";
import { renderArtifact } from "./tasks.js";

const MB = 1e6;

// "task:{task_id}:{call_id}" → "agent (task:{task_id})"; "user" → "you".
function author(createdBy) {
  if (!createdBy) return "?";
  if (createdBy === "user") return t("author_you");
  const [kind, id] = createdBy.split(":");
  return kind === "task" ? t("author_agent", { task: `task:${id}` }) : createdBy;
}

export class Workspace {
  constructor(el, { report, limitBytes }) {
    this.el = el;
    this.report = report;
    this.limitBytes = limitBytes;
    this.open = null; // {object_id, type, version, name}
    this.list = h("div", { class: "objects" });
    this.editor = h("div", { class: "editor" });
    this.note = h("div", { class: "note", role: "status" });
    const file = h("input", { type: "file", name: "upload", onchange: (e) => this.upload(e.target) });
    replace(el,
      h("div", { class: "ws-actions" },
        h("button", { onclick: () => this.createDocument() }, t("new_document")),
        h("label", { class: "upload" }, `${t("upload")}: `, file)),
      this.note, this.list, this.editor);
    this.history = new History(this.editor, {
      say: (text, kind) => this.say(text, kind),
      changed: () => this.refresh(),
      close: (id) => this.show(id),
    });
  }

  async refresh() {
    const objects = await apiAll("/v1/objects", "objects");
    if (!objects.length) return replace(this.list, h("p", { class: "muted" }, t("no_objects")));
    replace(this.list, h("ul", {}, objects.map((o) =>
      h("li", { dataset: { objectId: o.object_id } },
        h("button", { class: "link", onclick: () => this.show(o.object_id) }, o.name),
        h("span", { class: "muted" }, ` ${kindOf(o.type, o.media_type)}, ${t("version", { version: o.version })} `),
        // Its name starts with what it shows (a voice command "History" finds it).
        h("button", { type: "button", class: "history-open", "aria-label": `${t("history")}: ${o.name}`,
          onclick: () => this.showHistory(o.object_id) }, t("history"))))));
  }

  async showHistory(objectId) {
    this.open = null;
    this.say("");
    try { await this.history.show(objectId); } catch (e) { this.report(e); }
  }

  // An object changed (SSE `object.version`): an open document is not touched, only told.
  changed(ev) {
    if (!this.open || ev.data.object_id !== this.open.object_id) return;
    if (ev.data.version > this.open.version) {
      this.say(t("changed_elsewhere", { author: author(ev.data.created_by), version: ev.data.version }), "warn");
    }
  }

  say(text, kind = "info") {
    replace(this.note, text ? h("div", { class: `msg ${kind}` }, text) : null);
  }

  async show(objectId, keepNote = false) {
    const obj = await api(`/v1/objects/${objectId}`);
    this.open = { object_id: obj.object_id, type: obj.type, version: obj.version, name: obj.name };
    if (!keepNote) this.say("");
    if (obj.type === "asset") return replace(this.editor, await renderArtifact(obj.object_id));
    if (obj.type === "flow") {
      return new FlowView(this.editor, obj, { report: this.report, onSaved: (v) => this.saved(v) });
    }
    const value = obj.content.text;
    const area = h("textarea", { name: "content", rows: 14, value });
    area.value = value;
    replace(this.editor,
      h("div", { class: "editor-head" }, h("strong", {}, obj.name), " ",
        h("span", { class: "muted", dataset: { version: obj.version } }, t("version", { version: obj.version }))),
      area,
      h("button", { class: "primary", onclick: () => this.save(area.value) }, t("save")));
  }

  // A flow saved from its graph: the page's own version is not news from elsewhere.
  saved(version) {
    this.open.version = version;
    this.say("");
    this.refresh().catch(this.report);
  }

  async save(text, base = this.open.version) {
    const o = this.open;
    const content = { text };
    try {
      const w = await api(`/v1/objects/${o.object_id}`, { method: "PUT", body: { base_version: base, content } });
      await this.show(o.object_id);
      this.say(t("saved", { version: w.version }), "ok");
      this.refresh();
    } catch (e) {
      if (e instanceof ApiError && e.status === 409 && e.body.error === "version_conflict") {
        return this.conflict(text, e.body);
      }
      this.say(t("error", { detail: e.message }), "error");
    }
  }

  async conflict(mine, body) {
    const current = await api(`/v1/objects/${this.open.object_id}`);
    const box = h("div", { class: "conflict", dataset: { currentVersion: body.current_version } },
      h("strong", {}, t("conflict_title", { current: body.current_version, author: author(current.created_by) })),
      h("p", { class: "changed" }, body.changed || body.detail),
      h("p", { class: "muted" }, t("conflict_hint")),
      h("details", { open: true }, h("summary", {}, t("your_text")), h("pre", { class: "mine" }, mine)),
      h("button", { onclick: () => this.show(this.open.object_id) }, t("reload")),
      h("button", { class: "primary", onclick: () => this.save(mine, body.current_version) },
        t("reapply", { current: body.current_version })));
    replace(this.note, box);
  }

  async createDocument() {
    const name = window.prompt(t("new_document_name"));
    if (!name) return;
    try {
      const o = await api("/v1/objects", { method: "POST", body: { type: "document", name, content: { text: "" } } });
      await this.refresh();
      await this.show(o.object_id);
    } catch (e) { this.report(e); }
  }

  async upload(input) {
    const file = input.files?.[0];
    input.value = "";
    if (!file) return;
    const fmt = (n) => (n / MB).toFixed(1);
    if (file.size > this.limitBytes) {
      return this.say(t("too_large", { size: fmt(file.size), limit: fmt(this.limitBytes) }), "error");
    }
    const data = await new Promise((res, rej) => {
      const r = new FileReader();
      r.onload = () => res(String(r.result).split(",", 2)[1]);
      r.onerror = () => rej(r.error);
      r.readAsDataURL(file);
    });
    try {
      await api("/v1/objects", {
        method: "POST",
        body: { type: "asset", name: file.name, content: { media_type: file.type || "application/octet-stream", data_base64: data } },
      });
      this.say(t("uploaded"), "ok");
      this.refresh();
    } catch (e) {
      // The server has the last word on size (the page may not know the current limit).
      this.say(e.status === 413 ? e.message : t("error", { detail: e.message }), "error");
    }
  }
}

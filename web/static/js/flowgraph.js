// A flow object drawn as its graph: nodes as boxes in rows by topological layer (inputs
// above what they feed), edges as arrows, each node's status in the latest run kept live
// from the event stream. A node opens a form (a field per parameter, its type and its
// inputs); every change is saved as a whole new version on the version it was based on,
// so a change made meanwhile elsewhere is reported, never overwritten.
import { ApiError, api, apiAll } from "./api.js";
import { debounce, h, labelled, replace } from "./dom.js";
import { LANG, money, t } from "./i18n.js";

const STRINGS = {
  en: {
    graph: "Flow {name}: {n} nodes",
    node_label: "{id}, {type}, {status}{inputs}",
    node_inputs: ", from {ids}",
    not_run: "not run",
    add_node: "Add node",
    node_title: "Node {id}",
    new_node: "New node",
    node_id: "Node id",
    node_type: "Type",
    params: "Parameters",
    no_params: "No parameters.",
    inputs: "Inputs (edges into this node)",
    no_inputs: "No other nodes.",
    cycle: "{id} (would make a cycle)",
    add_param: "Add parameter",
    param_name: "Parameter name",
    param_kind: "Kind",
    kind_text: "text",
    kind_number: "number",
    kind_flag: "yes/no",
    remove_param: "Remove {name}",
    document: "Document",
    save_node: "Save node",
    remove_node: "Remove node",
    close: "Close",
    saved: "Saved as version {version}.",
    removed: "Removed node {id}; saved as version {version} (earlier versions are kept).",
    bad_id: "A node id is 1-40 letters, digits, '_', '-' or '.', and not taken.",
    bad_value: "{name}: {detail}",
    conflict: "Not saved: this flow changed meanwhile (now version {current}, by {author}).",
    conflict_keep: "Your change is kept here; apply it to version {current}, or reload.",
    apply_mine: "Apply my change to version {current}",
    reload: "Reload",
  },
  de: {
    graph: "Ablauf {name}: {n} Knoten",
    node_label: "{id}, {type}, {status}{inputs}",
    node_inputs: ", aus {ids}",
    not_run: "nicht gelaufen",
    add_node: "Knoten hinzufügen",
    node_title: "Knoten {id}",
    new_node: "Neuer Knoten",
    node_id: "Knoten-Id",
    node_type: "Art",
    params: "Parameter",
    no_params: "Keine Parameter.",
    inputs: "Eingänge (Kanten in diesen Knoten)",
    no_inputs: "Keine anderen Knoten.",
    cycle: "{id} (ergäbe einen Kreis)",
    add_param: "Parameter hinzufügen",
    param_name: "Name des Parameters",
    param_kind: "Art",
    kind_text: "Text",
    kind_number: "Zahl",
    kind_flag: "ja/nein",
    remove_param: "{name} entfernen",
    document: "Dokument",
    save_node: "Knoten speichern",
    remove_node: "Knoten entfernen",
    close: "Schließen",
    saved: "Als Version {version} gespeichert.",
    removed: "Knoten {id} entfernt; als Version {version} gespeichert (frühere Versionen bleiben).",
    bad_id: "Eine Knoten-Id hat 1-40 Buchstaben, Ziffern, '_', '-' oder '.' und ist noch frei.",
    bad_value: "{name}: {detail}",
    conflict: "Nicht gespeichert: der Ablauf wurde inzwischen geändert (jetzt Version {current}, von {author}).",
    conflict_keep: "Deine Änderung bleibt hier; wende sie auf Version {current} an oder lade neu.",
    apply_mine: "Meine Änderung auf Version {current} anwenden",
    reload: "Neu laden",
  },
};
function tr(key, vars = {}) {
  const s = (STRINGS[LANG] || STRINGS.en)[key] ?? STRINGS.en[key];
  return s.replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? ""));
}

const NODE_TYPES = ["image", "video", "audio", "3d", "edit", "document"];
const NODE_ID = /^[A-Za-z0-9_.-]{1,40}$/;
const DEFAULT_PARAMS = {
  image: { prompt: "" }, video: { prompt: "", duration_s: 2 }, audio: { prompt: "", duration_s: 2 },
  "3d": { prompt: "" }, edit: { prompt: "" }, document: { object_id: "" },
};
const ENDED = ["succeeded", "failed", "declined"];
const SVG = "http://www.w3.org/2000/svg";
// Box size and gaps in px; a row wider than the panel scrolls inside its own box.
const W = 136, H = 48, GX = 20, GY = 46, PAD = 10;

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

function ensureStyles() {
  if (document.querySelector("link[data-flowgraph]")) return;
  document.head.append(h("link", { rel: "stylesheet", href: "/app/flowgraph.css", dataset: { flowgraph: "1" } }));
}

// Rows of node ids by longest path from a root; nodes caught in a cycle (a flow saved
// with one cannot run) go in one last row so they can still be seen and fixed.
export function layers(nodes) {
  const ids = Object.keys(nodes).sort();
  const ins = (id) => [...new Set((nodes[id].inputs || []).filter((i) => i in nodes))];
  const indegree = new Map(ids.map((id) => [id, ins(id).length]));
  const children = new Map(ids.map((id) => [id, []]));
  for (const id of ids) for (const i of ins(id)) children.get(i).push(id);
  const layer = new Map();
  const ready = ids.filter((id) => indegree.get(id) === 0);
  for (const id of ready) layer.set(id, 0);
  while (ready.length) {
    const id = ready.shift();
    for (const c of children.get(id)) {
      layer.set(c, Math.max(layer.get(c) ?? 0, layer.get(id) + 1));
      indegree.set(c, indegree.get(c) - 1);
      if (indegree.get(c) === 0) ready.push(c);
    }
  }
  const rows = [];
  const stuck = [];
  for (const id of ids) {
    if (indegree.get(id) > 0) stuck.push(id);
    else (rows[layer.get(id)] ||= []).push(id);
  }
  if (stuck.length) rows.push(stuck);
  return rows.filter(Boolean);
}

// Positions: each row ordered by the mean column of its inputs (fewer crossings).
export function layout(nodes) {
  const rows = layers(nodes);
  const col = new Map();
  const pos = new Map();
  rows.forEach((row, r) => {
    const key = (id) => {
      const ins = (nodes[id].inputs || []).filter((i) => col.has(i));
      return ins.length ? ins.reduce((a, i) => a + col.get(i), 0) / ins.length : -1;
    };
    row.sort((a, b) => key(a) - key(b) || a.localeCompare(b));
    row.forEach((id, c) => { col.set(id, c); pos.set(id, { x: PAD + c * (W + GX), y: PAD + r * (H + GY) }); });
  });
  const widest = Math.max(1, ...rows.map((r) => r.length));
  return { pos, width: 2 * PAD + widest * W + (widest - 1) * GX, height: 2 * PAD + rows.length * H + (rows.length - 1) * GY };
}

// Every node downstream of `id` (an input from one of them would close a cycle).
function downstream(nodes, id) {
  const out = new Set();
  const todo = [id];
  while (todo.length) {
    const cur = todo.pop();
    for (const [nid, n] of Object.entries(nodes)) {
      if ((n.inputs || []).includes(cur) && !out.has(nid)) { out.add(nid); todo.push(nid); }
    }
  }
  return out;
}

const short = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);

export class FlowView {
  constructor(el, obj, { report, onSaved }) {
    ensureStyles();
    this.el = el;
    this.report = report;
    this.onSaved = onSaved;
    this.id = obj.object_id;
    this.name = obj.name;
    this.version = obj.version;
    this.nodes = obj.content.nodes || {};
    this.run = null;
    this.status = {}; // node id -> {status, stale, error}
    this.graph = h("div", { class: "fg-graph" });
    this.note = h("div", { class: "fg-note", role: "status" });
    this.form = h("div", { class: "fg-form" });
    this.runLine = h("div", { class: "run muted", role: "status" });
    this.versionTag = h("span", { class: "muted", dataset: { version: obj.version } }, t("version", { version: obj.version }));
    this.refreshRun = debounce(() => this.loadRun().catch(report), 150);
    this.listener = (e) => this.onEvent(e.detail);
    document.addEventListener("lomo:event", this.listener);
    replace(el,
      h("div", { class: "editor-head" }, h("strong", {}, obj.name), " ", this.versionTag),
      h("div", { class: "fg-actions" },
        h("button", { class: "run-flow", onclick: () => this.start() }, t("run_flow")),
        h("button", { class: "fg-add", onclick: () => this.openForm(null) }, tr("add_node"))),
      this.runLine, this.graph, this.note, this.form);
    this.draw();
    api(`/v1/objects/${this.id}/runs?limit=1`).then(({ runs }) => { if (runs.length && !this.run) this.show(runs[0]); }).catch(report);
  }

  // The view was replaced (another object opened): it stops listening.
  alive() {
    if (this.el.contains(this.graph)) return true;
    document.removeEventListener("lomo:event", this.listener);
    return false;
  }

  draw() {
    const { pos, width, height } = layout(this.nodes);
    const ids = Object.keys(this.nodes);
    const svg = s("svg", {
      class: "fg-svg", width, height, viewBox: `0 0 ${width} ${height}`, role: "group",
      "aria-label": tr("graph", { name: this.name, n: ids.length }),
    });
    const arrow = `fg-arrow-${this.id}`;
    svg.append(s("defs", {}, s("marker", { id: arrow, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "fg-arrowhead" }))));
    const edges = s("g", { "aria-hidden": "true" });
    for (const id of ids) {
      for (const from of (this.nodes[id].inputs || []).filter((i) => pos.has(i))) {
        const a = pos.get(from), b = pos.get(id);
        const [x1, y1, x2, y2] = [a.x + W / 2, a.y + H, b.x + W / 2, b.y];
        const bend = Math.max(20, (y2 - y1) / 2);
        edges.append(s("path", {
          class: "fg-edge", "marker-end": `url(#${arrow})`, "data-from": from, "data-to": id,
          d: `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2 - 2}`,
        }));
      }
    }
    svg.append(edges, ...ids.map((id) => this.drawNode(id, pos.get(id))));
    replace(this.graph, svg);
  }

  drawNode(id, { x, y }) {
    const g = s("g", { class: "fg-node", tabindex: 0, role: "button", transform: `translate(${x},${y})`, "data-node-id": id },
      s("rect", { width: W, height: H, rx: 7 }),
      s("text", { x: 10, y: 20, class: "fg-id" }, short(id, 17)),
      s("text", { x: 10, y: 38, class: "fg-sub" }, ""));
    g.addEventListener("click", () => this.openForm(id));
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); this.openForm(id); }
    });
    this.paint(g);
    return g;
  }

  // A node's status drawn in place (its element, and so the focus, stays).
  paint(g) {
    const id = g.dataset.nodeId;
    const node = this.nodes[id];
    const st = this.status[id] || { status: "none" };
    const word = st.status === "none" ? tr("not_run") : st.status;
    g.dataset.status = st.status;
    g.classList.toggle("fg-stale", Boolean(st.stale));
    g.classList.toggle("fg-selected", this.formFor === id);
    g.querySelector(".fg-sub").textContent = short(`${node.type} · ${word}${st.stale ? " *" : ""}`, 20);
    const ins = node.inputs || [];
    g.setAttribute("aria-label", tr("node_label", {
      id, type: node.type, status: st.stale ? `${word}, stale` : word,
      inputs: ins.length ? tr("node_inputs", { ids: ins.join(", ") }) : "",
    }));
  }

  paintAll() {
    for (const g of this.graph.querySelectorAll(".fg-node")) this.paint(g);
  }

  onEvent(ev) {
    if (!this.alive()) return;
    const d = ev.data || {};
    if (ev.type === "flow.run" && d.flow_id === this.id) {
      if (!this.run || this.run.run_id !== d.run_id) this.run = { run_id: d.run_id, status: d.status };
      this.refreshRun();
    } else if (ev.type === "flow.node" && this.run && d.run_id === this.run.run_id) {
      this.status[d.node_id] = { ...(this.status[d.node_id] || {}), status: d.status, error: d.error };
      const g = this.graph.querySelector(`[data-node-id="${CSS.escape(d.node_id)}"]`);
      if (g) this.paint(g);
      this.refreshRun();
    }
  }

  async start() {
    try {
      this.show(await api(`/v1/objects/${this.id}/runs`, { method: "POST", body: {} }));
    } catch (e) {
      this.say(t("error", { detail: e.message }), "error");
    }
  }

  async loadRun() {
    if (this.run && this.alive()) this.show(await api(`/v1/flow-runs/${this.run.run_id}`));
  }

  // A run's view (RunView of the api): the status line and every node's status.
  show(r) {
    this.run = r;
    if (!r.nodes) return this.refreshRun();
    this.status = { ...r.nodes };
    const p = r.progress;
    const names = (pred) => Object.entries(r.nodes).filter(([, v]) => pred(v)).map(([k]) => k).join(", ");
    const extra = [
      p.failed ? t("run_failed", { nodes: names((v) => v.status === "failed") }) : "",
      r.status === "waiting_price" ? t("run_price", { amount: money(r.price.amount_cents) }) : "",
      names((v) => v.stale) ? t("run_stale", { nodes: names((v) => v.stale) }) : "",
    ].filter(Boolean).join("; ");
    const line = t("run_line", { run: r.run_id, status: r.status, done: p.done, total: p.total });
    replace(this.runLine, extra ? `${line}; ${extra}` : line);
    this.runLine.dataset.status = r.status;
    this.runLine.classList.toggle("ended", ENDED.includes(r.status));
    this.paintAll();
  }

  say(text, kind = "info") {
    replace(this.note, text ? h("div", { class: `msg ${kind}` }, text) : null);
  }

  // --- the node form ---------------------------------------------------------------

  async openForm(id) {
    const node = id ? this.nodes[id] : { type: "image", params: { ...DEFAULT_PARAMS.image }, inputs: [] };
    const docs = (await apiAll("/v1/objects", "objects").catch(() => [])).filter((o) => o.type === "document");
    this.formFor = id;
    this.draft = {
      id, newId: "", type: node.type, inputs: new Set(node.inputs || []), docs,
      params: Object.entries(node.params || {}).map(([key, value]) => ({ key, value, kind: kindOf(value) })),
    };
    this.renderForm();
    this.paintAll();
    this.form.querySelector("input, select, textarea")?.focus();
  }

  closeForm() {
    const id = this.formFor;
    this.formFor = undefined;
    replace(this.form);
    this.paintAll();
    if (id) this.graph.querySelector(`[data-node-id="${CSS.escape(id)}"]`)?.focus();
  }

  renderForm() {
    const d = this.draft;
    const title = d.id ? tr("node_title", { id: d.id }) : tr("new_node");
    const idField = d.id ? null : labelled(tr("node_id"), h("input", {
      name: "node_id", value: d.newId, autocomplete: "off", oninput: (e) => { d.newId = e.target.value.trim(); },
    }));
    const type = h("select", { name: "node_type", onchange: (e) => this.retype(e.target.value) },
      NODE_TYPES.map((x) => h("option", { value: x, selected: x === d.type }, x)));
    const submit = (e) => { e.preventDefault(); this.saveDraft(); };
    const form = h("form", { class: "fg-node-form", onsubmit: submit, "aria-label": title,
      onkeydown: (e) => { if (e.key === "Escape") { e.preventDefault(); this.closeForm(); } } },
      h("h3", {}, title), idField, labelled(tr("node_type"), type),
      this.paramFields(), this.addParamRow(), this.inputFields(),
      h("div", { class: "fg-form-actions" },
        h("button", { class: "primary", type: "submit" }, tr("save_node")),
        d.id ? h("button", { type: "button", class: "fg-remove", onclick: () => this.removeNode(d.id) }, tr("remove_node")) : null,
        h("button", { type: "button", onclick: () => this.closeForm() }, tr("close"))));
    replace(this.form, form);
  }

  retype(type) {
    const d = this.draft;
    d.type = type;
    for (const [key, value] of Object.entries(DEFAULT_PARAMS[type] || {})) {
      if (!d.params.some((p) => p.key === key)) d.params.push({ key, value, kind: kindOf(value) });
    }
    this.renderForm();
    this.form.querySelector("select[name=node_type]")?.focus();
  }

  paramFields() {
    const d = this.draft;
    const rows = d.params.map((p) => h("div", { class: "fg-param", dataset: { param: p.key } },
      labelled(p.key, this.paramInput(p)),
      h("button", { type: "button", class: "link", onclick: () => { d.params = d.params.filter((x) => x !== p); this.renderForm(); } },
        tr("remove_param", { name: p.key }))));
    return h("fieldset", { class: "fg-params" }, h("legend", {}, tr("params")),
      rows.length ? rows : h("p", { class: "muted" }, tr("no_params")));
  }

  paramInput(p) {
    const name = `param-${p.key}`;
    const set = (v) => { p.value = v; };
    if (p.key === "object_id" && this.draft.type === "document") {
      const known = this.draft.docs.some((o) => o.object_id === p.value);
      return h("select", { name, onchange: (e) => set(e.target.value) },
        h("option", { value: "", selected: !p.value }, "—"),
        known || !p.value ? null : h("option", { value: p.value, selected: true }, p.value),
        this.draft.docs.map((o) => h("option", { value: o.object_id, selected: o.object_id === p.value }, o.name)));
    }
    if (p.kind === "number") {
      return h("input", { name, type: "number", step: "any", value: String(p.value), oninput: (e) => set(e.target.value === "" ? "" : Number(e.target.value)) });
    }
    if (p.kind === "flag") {
      return h("input", { name, type: "checkbox", class: "fg-check", checked: Boolean(p.value), onchange: (e) => set(e.target.checked) });
    }
    if (p.kind === "json") {
      const area = h("textarea", { name, rows: 3, class: "fg-json", oninput: (e) => set(e.target.value) });
      area.value = typeof p.value === "string" ? p.value : JSON.stringify(p.value);
      p.value = area.value;
      return area;
    }
    if (p.key === "prompt" || String(p.value).length > 40) {
      const area = h("textarea", { name, rows: 3, oninput: (e) => set(e.target.value) });
      area.value = String(p.value);
      return area;
    }
    return h("input", { name, value: String(p.value), autocomplete: "off", oninput: (e) => set(e.target.value) });
  }

  addParamRow() {
    const name = h("input", { name: "new_param", autocomplete: "off" });
    const kind = h("select", { name: "new_param_kind" },
      ["text", "number", "flag"].map((k) => h("option", { value: k }, tr(`kind_${k}`))));
    const add = () => {
      const key = name.value.trim();
      if (!key || this.draft.params.some((p) => p.key === key)) return name.focus();
      this.draft.params.push({ key, kind: kind.value, value: { text: "", number: 0, flag: false }[kind.value] });
      this.renderForm();
      this.form.querySelector(`[name="param-${CSS.escape(key)}"]`)?.focus();
    };
    return h("div", { class: "fg-add-param" }, labelled(tr("param_name"), name), labelled(tr("param_kind"), kind),
      h("button", { type: "button", onclick: add }, tr("add_param")));
  }

  inputFields() {
    const d = this.draft;
    const below = d.id ? downstream(this.nodes, d.id) : new Set();
    const others = Object.keys(this.nodes).filter((x) => x !== d.id).sort();
    const boxes = others.map((x) => {
      const box = h("input", { type: "checkbox", class: "fg-check", name: "input", value: x, checked: d.inputs.has(x), disabled: below.has(x),
        onchange: (e) => (e.target.checked ? d.inputs.add(x) : d.inputs.delete(x)) });
      return h("label", { class: "fg-input" }, box, " ", below.has(x) ? tr("cycle", { id: x }) : x);
    });
    return h("fieldset", { class: "fg-inputs" }, h("legend", {}, tr("inputs")),
      boxes.length ? boxes : h("p", { class: "muted" }, tr("no_inputs")));
  }

  // --- saving ----------------------------------------------------------------------

  saveDraft() {
    const d = this.draft;
    const id = d.id || d.newId;
    if (!d.id && (!NODE_ID.test(id) || id in this.nodes)) return this.say(tr("bad_id"), "error");
    const params = {};
    for (const p of d.params) {
      if (p.kind !== "json") { params[p.key] = p.value; continue; }
      try { params[p.key] = JSON.parse(p.value); } catch (e) { return this.say(tr("bad_value", { name: p.key, detail: e.message }), "error"); }
    }
    // The inputs in the order they were, new ones after (an edit cuts its inputs in order).
    const before = (this.nodes[id]?.inputs || []).filter((i) => d.inputs.has(i));
    const inputs = [...before, ...[...d.inputs].filter((i) => !before.includes(i)).sort()];
    const change = (nodes) => ({ ...nodes, [id]: { ...(nodes[id] || {}), type: d.type, params, inputs } });
    return this.save(change, (v) => tr("saved", { version: v }), id);
  }

  removeNode(id) {
    const change = (nodes) => Object.fromEntries(Object.entries(nodes).filter(([k]) => k !== id)
      .map(([k, n]) => [k, { ...n, inputs: (n.inputs || []).filter((i) => i !== id) }]));
    return this.save(change, (v) => tr("removed", { id, version: v }), null);
  }

  // One whole new version on `base`; a 409 keeps the change (a function of the nodes) to
  // re-apply on the version that is current now.
  async save(change, said, focusId, base = this.version, nodes = this.nodes) {
    try {
      const w = await api(`/v1/objects/${this.id}`, { method: "PUT", body: { base_version: base, content: { nodes: change(nodes) } } });
      this.onSaved?.(w.version);
      await this.reload();
      this.say(said(w.version), "ok");
      if (focusId) this.graph.querySelector(`[data-node-id="${CSS.escape(focusId)}"]`)?.focus();
    } catch (e) {
      if (e instanceof ApiError && e.status === 409 && e.body.error === "version_conflict") return this.conflict(change, said, focusId, e.body);
      this.say(t("error", { detail: e.message }), "error");
    }
  }

  async conflict(change, said, focusId, body) {
    const current = await api(`/v1/objects/${this.id}`);
    const by = current.created_by === "user" ? t("author_you") : current.created_by || "?";
    const apply = () => this.save(change, said, focusId, current.version, current.content.nodes || {});
    replace(this.note, h("div", { class: "conflict fg-conflict", role: "alert", dataset: { currentVersion: current.version } },
      h("strong", {}, tr("conflict", { current: current.version, author: by })),
      body.changed ? h("p", { class: "changed" }, body.changed) : null,
      h("p", { class: "muted" }, tr("conflict_keep", { current: current.version })),
      h("button", { type: "button", onclick: () => this.reload().then(() => this.say("")) }, tr("reload")),
      h("button", { type: "button", class: "primary", onclick: apply }, tr("apply_mine", { current: current.version }))));
  }

  async reload() {
    const obj = await api(`/v1/objects/${this.id}`);
    this.version = obj.version;
    this.nodes = obj.content.nodes || {};
    this.versionTag.dataset.version = obj.version;
    this.versionTag.textContent = t("version", { version: obj.version });
    this.formFor = undefined;
    replace(this.form);
    this.draw();
  }
}

function kindOf(value) {
  if (typeof value === "number") return "number";
  if (typeof value === "boolean") return "flag";
  if (typeof value === "string") return "text";
  return "json";
}

// A tiny element builder: h("button", {onclick, class: "x"}, "text", child, …).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

// Runs `fn` at most once per `ms`, the last call winning (SSE bursts → one refresh).
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

// Enter sends, Shift+Enter breaks the line (and an IME composing a word keeps its Enter).
export function enterSends(area) {
  area.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
    e.preventDefault();
    area.form?.requestSubmit();
  });
}

// A re-render replaces elements; the field being typed in (marked data-keep) gets its
// focus and caret back in its replacement.
export function keepFocus(el, render) {
  const active = document.activeElement;
  const key = el.contains(active) ? active?.dataset?.keep : undefined;
  const caret = key && "selectionStart" in active ? [active.selectionStart, active.selectionEnd] : null;
  const result = render();
  if (key) {
    const again = el.querySelector(`[data-keep="${CSS.escape(key)}"]`);
    again?.focus();
    if (again && caret) again.setSelectionRange(...caret);
  }
  return result;
}

let ids = 0;
// A form field with its visible label, tied by id.
export function labelled(text, field, attrs = {}) {
  if (!field.id) field.id = `f${++ids}`;
  return h("div", { class: "field", ...attrs }, h("label", { for: field.id }, text), field);
}

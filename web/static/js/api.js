// The page's only door to the platform: the public /v1 API with the person's token in the
// Authorization header, and the event stream read with fetch (EventSource cannot send
// headers), resumed with Last-Event-ID after any break.
const KEY = "lomo.token";

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.detail || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

export const auth = {
  get token() { return sessionStorage.getItem(KEY) || localStorage.getItem(KEY); },
  set(token) { localStorage.setItem(KEY, token); },
  clear() { localStorage.removeItem(KEY); sessionStorage.removeItem(KEY); },
};

let onUnauthorized = () => {};
export function whenUnauthorized(fn) { onUnauthorized = fn; }

export async function api(path, { method = "GET", body, headers = {} } = {}) {
  const h = { Authorization: `Bearer ${auth.token}`, ...headers };
  if (body !== undefined) h["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let data = {};
  try { data = text ? JSON.parse(text) : {}; } catch { data = { detail: text }; }
  if (r.status === 401) { onUnauthorized(); throw new ApiError(401, data); }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

// Every row of a paged list (answer `{[key]: [...], next}`), following `next` up to
// `maxPages` pages of 200: the page shows the person's whole list, one bounded request
// at a time.
export async function apiAll(path, key, maxPages = 10) {
  const rows = [];
  const sep = path.includes("?") ? "&" : "?";
  let cursor = null;
  for (let i = 0; i < maxPages; i++) {
    const page = await api(`${path}${sep}limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    rows.push(...page[key]);
    if (!page.next) break;
    cursor = page.next;
  }
  return rows;
}

// Is this token someone's? Answers without a 401 so a wrong paste is a message, not an error.
export async function checkToken(token) {
  const r = await fetch("/v1/session/check", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token }),
  });
  return r.ok ? (await r.json()).valid === true : false;
}

const blobs = new Map();
// Media need the token too, so they are fetched and shown from object URLs.
export async function blobUrl(objectId) {
  if (!blobs.has(objectId)) {
    blobs.set(objectId, (async () => {
      const r = await fetch(`/v1/objects/${objectId}/blob`, { headers: { Authorization: `Bearer ${auth.token}` } });
      if (!r.ok) throw new ApiError(r.status, {});
      return URL.createObjectURL(await r.blob());
    })());
  }
  try { return await blobs.get(objectId); } catch (e) { blobs.delete(objectId); throw e; }
}

// Reads /v1/events forever; `onEvent({seq, type, data})` for each, `onState(connected)`.
export function streamEvents(onEvent, onState) {
  let last = null;
  let stopped = false;
  async function once() {
    const headers = { Authorization: `Bearer ${auth.token}` };
    if (last !== null) headers["Last-Event-ID"] = String(last);
    const r = await fetch("/v1/events", { headers });
    if (r.status === 401) { stopped = true; onUnauthorized(); return; }
    if (!r.ok || !r.body) throw new Error(`events: HTTP ${r.status}`);
    onState(true);
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const ev = { seq: null, type: "message", data: {} };
        for (const line of frame.split("\n")) {
          if (line.startsWith("id: ")) ev.seq = Number(line.slice(4));
          else if (line.startsWith("event: ")) ev.type = line.slice(7);
          else if (line.startsWith("data: ")) ev.data = JSON.parse(line.slice(6)).data || {}; // {seq, type, data, at}
        }
        if (ev.seq !== null) { last = ev.seq; onEvent(ev); }
      }
    }
  }
  (async () => {
    while (!stopped) {
      try { await once(); } catch { /* the api is away: try again below */ }
      if (stopped) return;
      onState(false);
      await new Promise((res) => setTimeout(res, 1000));
    }
  })();
  return { stop() { stopped = true; } };
}

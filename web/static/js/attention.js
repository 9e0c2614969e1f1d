// Getting the person back when a task needs them while the page is hidden: a count of the
// new questions in the title ("(2) Lomo") and a browser notification per question. The
// count is of open cards the person has not had the page visible for; it clears when the
// page is visible again and drops as cards are answered. Which cards are new is asked of
// the api (open cards now, minus those seen), so the stream's replay of old events on
// connect never counts or notifies twice.
import { apiAll, auth } from "./api.js";
import { debounce, h } from "./dom.js";
import { LANG } from "./i18n.js";

const ASKED = "lomo.notify.asked";
const STRINGS = {
  en: {
    notify: "Notify me when a task needs me",
    notify_title: "Lomo: a task needs you",
  },
  de: {
    notify: "Benachrichtige mich, wenn eine Aufgabe mich braucht",
    notify_title: "Lomo: eine Aufgabe braucht dich",
  },
};
const tr = (key) => (STRINGS[LANG] || STRINGS.en)[key];

const hidden = () => document.visibilityState === "hidden";
const supported = () => "Notification" in window;

// Permission is asked once, from the person's click on the header button; the answer
// (or a browser that already decided) is remembered and the button goes away.
function permissionButton() {
  if (!supported() || Notification.permission !== "default" || localStorage.getItem(ASKED)) return null;
  const button = h("button", { type: "button", class: "link notify-ask" }, tr("notify"));
  button.addEventListener("click", () => {
    localStorage.setItem(ASKED, "1");
    button.remove();
    Notification.requestPermission();
  });
  return button;
}

function notify(card) {
  if (!supported() || Notification.permission !== "granted") return;
  const n = new Notification(tr("notify_title"), { body: card.title, tag: card.card_id });
  n.addEventListener("click", () => { window.focus(); n.close(); });
}

let watching = false;

// Starts watching (once per page, however often the person signs in again); returns the
// header's permission button (or null when not needed). `report` gets api errors.
export function startAttention(report) {
  if (!watching) watch(report);
  watching = true;
  return permissionButton();
}

function watch(report) {
  const base = document.title;
  const seen = new Set();
  const notified = new Set();
  let ready = false;
  let lastOpen = [];
  const show = (n) => {
    document.title = n ? `(${n}) ${base}` : base;
    document.documentElement.dataset.attention = String(n);
  };
  const recount = debounce(async () => {
    if (!auth.token) return show(0); // signed out: nobody to call
    try {
      const open = await apiAll("/v1/cards?status=open", "cards");
      lastOpen = open.map((c) => c.card_id);
      if (!ready || !hidden()) {
        for (const c of open) seen.add(c.card_id);
        ready = true;
        return show(0);
      }
      const fresh = open.filter((c) => !seen.has(c.card_id));
      for (const c of fresh.filter((x) => !notified.has(x.card_id))) {
        notified.add(c.card_id);
        notify(c);
      }
      show(fresh.length);
    } catch (e) { report(e); }
  }, 200);
  document.addEventListener("visibilitychange", () => {
    // What the page held when shown counts as seen, even if it is hidden again at once.
    if (!hidden()) { for (const id of lastOpen) seen.add(id); show(0); }
    recount();
  });
  document.addEventListener("lomo:event", (e) => {
    if (e.detail.type.startsWith("card.")) recount();
  });
  recount();
}

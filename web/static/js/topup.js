// "Add credit": a top-up at the payment provider. The button opens a small form (amount in
// EUR); the payment's status and the new balance are announced in a live region while the
// page asks the platform how the payment stands (the provider's signed report books it).
import { api } from "./api.js";
import { h, labelled, replace } from "./dom.js";
import { LANG, money } from "./i18n.js";

const TEXT = {
  en: {
    add: "Add credit", amount: "Amount (EUR)", pay: "Pay", cancel: "Cancel",
    created: "Starting the payment…", pending: "Payment pending…",
    succeeded: "Credit added: {amount}. Balance: {balance}.",
    failed: "The payment failed: {error}", slow: "The payment is still pending; the balance follows when it is done.",
  },
  de: {
    add: "Guthaben aufladen", amount: "Betrag (EUR)", pay: "Bezahlen", cancel: "Abbrechen",
    created: "Zahlung wird gestartet…", pending: "Zahlung ausstehend…",
    succeeded: "Guthaben aufgeladen: {amount}. Guthaben: {balance}.",
    failed: "Die Zahlung ist fehlgeschlagen: {error}", slow: "Die Zahlung steht noch aus; das Guthaben folgt, sobald sie abgeschlossen ist.",
  },
};
const say = (key, vars = {}) =>
  (TEXT[LANG] || TEXT.en)[key].replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? ""));
const POLL_MS = 500;
const POLL_FOR_MS = 60_000;

export function topUpControl({ report, onChange }) {
  const status = h("p", { class: "topup-status", role: "status", "aria-live": "polite" });
  const amount = h("input", { type: "number", name: "amount", min: "1", max: "500", step: "1", value: "5", inputmode: "numeric", required: true });
  const form = h("form", { class: "topup-form", hidden: true });
  const toggle = h("button", { type: "button", class: "topup-toggle", "aria-expanded": "false", "aria-controls": "topup-form" }, say("add"));
  form.id = "topup-form";
  const open = (yes) => {
    form.hidden = !yes;
    toggle.setAttribute("aria-expanded", String(yes));
    (yes ? amount : toggle).focus();
  };
  toggle.addEventListener("click", () => open(form.hidden));
  form.addEventListener("keydown", (e) => { if (e.key === "Escape") open(false); });
  const pay = h("button", { type: "submit", class: "primary" }, say("pay"));
  const show = (p) => {
    const vars = { amount: money(p.amount_cents), balance: money(p.balance), error: p.error || "" };
    replace(status, say(p.status, vars));
    status.dataset.status = p.status;
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const cents = Math.round(Number(amount.value) * 100);
    pay.disabled = true;
    try {
      let p = await api("/v1/budget/top-ups", { method: "POST", body: { amount_cents: cents, request_id: crypto.randomUUID() } });
      show(p);
      const until = Date.now() + POLL_FOR_MS;
      while ((p.status === "pending" || p.status === "created") && Date.now() < until) {
        await new Promise((r) => setTimeout(r, POLL_MS));
        p = await api(`/v1/budget/top-ups/${p.payment_id}`);
        show(p);
      }
      if (p.status === "pending" || p.status === "created") replace(status, say("slow"));
      if (p.status === "succeeded") { form.hidden = true; toggle.setAttribute("aria-expanded", "false"); onChange(); }
    } catch (err) { report(err); } finally { pay.disabled = false; }
  });
  form.append(labelled(say("amount"), amount), pay,
    h("button", { type: "button", class: "link", onclick: () => open(false) }, say("cancel")));
  return h("div", { class: "topup" }, toggle, form, status);
}

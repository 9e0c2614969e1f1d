// Cards: the agent's questions, answered in place. Only these clicks (an authenticated
// action) create approvals, selections or confirmations.
import { api, blobUrl } from "./api.js";
import { enterSends, h, labelled } from "./dom.js";
import { money, t } from "./i18n.js";

// What the person began to write in a card's revise box outlives the card's re-renders.
const revisions = new Map();

export function renderCard(card, onDone, report) {
  const answer = async (action, option_id, text) => {
    box.classList.add("busy");
    try {
      await api(`/v1/cards/${card.card_id}/actions`, { method: "POST", body: { action, option_id, text } });
      revisions.delete(card.card_id);
      onDone();
    } catch (e) {
      box.classList.remove("busy");
      report(e);
    }
  };
  const box = h("div", { class: `card card-${card.kind}`, dataset: { cardId: card.card_id, kind: card.kind } },
    h("div", { class: "card-title" }, card.title));
  if (card.status !== "open") {
    box.append(h("div", { class: "muted" }, t("card_answered")));
    return box;
  }
  if (card.price) box.append(h("div", { class: "price" }, t("price", { amount: money(card.price.amount_cents) })));
  const buttons = h("div", { class: "card-actions" });
  if (card.kind === "select") {
    const grid = h("div", { class: "thumbs" });
    for (const o of card.options || []) {
      const btn = h("button", { class: "thumb", dataset: { optionId: o.id }, onclick: () => answer("select", o.id) },
        h("span", {}, o.label));
      if (o.id.startsWith("obj_")) {
        blobUrl(o.id).then((url) => btn.prepend(h("img", { src: url, alt: o.label }))).catch(() => {});
      }
      grid.append(btn);
    }
    box.append(grid);
  } else if (card.kind === "clarify") {
    for (const o of card.options || []) {
      buttons.append(h("button", { dataset: { optionId: o.id }, onclick: () => answer("select", o.id) },
        o.id === "new" ? t("new_task") : o.label));
    }
  } else {
    const yes = { forget: t("forget"), delete: t("delete") }[card.kind] || t("confirm");
    const no = card.kind === "forget" || card.kind === "delete" ? t("keep") : t("decline");
    buttons.append(
      h("button", { class: "primary", dataset: { action: "confirm" }, onclick: () => answer("confirm") }, yes),
      h("button", { dataset: { action: "reject" }, onclick: () => answer("reject") }, no),
    );
  }
  box.append(buttons);
  if (card.kind !== "clarify") box.append(reviseForm(card, answer));
  return box;
}

// "Not quite": the person says in words what to change instead of choosing.
function reviseForm(card, answer) {
  const area = h("textarea", {
    name: "revise", rows: 2, dataset: { keep: `revise-${card.card_id}` },
    oninput: (e) => revisions.set(card.card_id, e.target.value),
  });
  area.value = revisions.get(card.card_id) || "";
  enterSends(area);
  const submit = (e) => {
    e.preventDefault();
    const text = area.value.trim();
    if (text) answer("revise", undefined, text);
  };
  return h("form", { class: "revise", onsubmit: submit },
    labelled(t("revise_label"), area),
    h("button", { type: "submit", dataset: { action: "revise" } }, t("revise")));
}

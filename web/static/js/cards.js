// Cards: the agent's questions, answered in place. Only these clicks (an authenticated
// action) create approvals, selections or confirmations.
import { api, blobUrl } from "./api.js";
import { h } from "./dom.js";
import { money, t } from "./i18n.js";

export function renderCard(card, onDone, report) {
  const answer = async (action, option_id) => {
    box.classList.add("busy");
    try {
      await api(`/v1/cards/${card.card_id}/actions`, { method: "POST", body: { action, option_id } });
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
  return box;
}

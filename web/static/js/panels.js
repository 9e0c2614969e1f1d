// Budget and memory: what is spent and reserved, and what the agent remembers, with where
// each memory came from and a way to forget it (through a confirmation card).
import { api, apiAll } from "./api.js";
import { renderCard } from "./cards.js";
import { h, replace } from "./dom.js";
import { money, t } from "./i18n.js";

export async function renderBudget(el) {
  const b = await api("/v1/budget");
  replace(el, h("dl", { class: "budget" },
    h("dt", {}, t("balance")), h("dd", { dataset: { field: "balance" } }, money(b.balance)),
    h("dt", {}, t("reserved")), h("dd", { dataset: { field: "reserved" } }, money(b.reserved)),
    h("dt", {}, t("spent")), h("dd", { dataset: { field: "spent" } }, money(b.spent)),
    h("dt", {}, t("daily_free")), h("dd", { dataset: { field: "daily_free" } },
      `${money(b.daily_free_used)} / ${money(b.settings.daily_free_limit)}`)));
}

export async function renderMemory(el, { refresh, report }) {
  const [profile, memories] = await Promise.all([api("/v1/memory/profile"), apiAll("/v1/memory", "memories")]);
  const byId = new Map(memories.map((m) => [m.memory_id, m]));
  const forget = async (memoryId, li) => {
    try {
      const { card_id } = await api("/v1/memory/forget", { method: "POST", body: { memory_id: memoryId } });
      const card = await api(`/v1/cards/${card_id}`);
      li.append(renderCard(card, refresh, report));
    } catch (e) { report(e); }
  };
  const item = (m) => {
    const li = h("li", { dataset: { memoryId: m.memory_id } },
      h("span", { class: "memory-content" }, m.content), " ",
      h("span", { class: "muted" },
        `(${t(m.kind || "stated")}, ${m.scope || "profile"}, ${t("source", { n: (m.sources || []).length })})`), " ");
    li.append(h("button", { class: "link", onclick: () => forget(m.memory_id, li) }, t("forget_this")));
    return li;
  };
  const profileItems = profile.items.map((p) => ({ ...byId.get(p.memory_id), ...p }));
  const others = memories.filter((m) => m.status === "active" && !profile.items.some((p) => p.memory_id === m.memory_id));
  replace(el,
    h("h3", {}, t("profile")),
    profileItems.length ? h("ul", { class: "memories profile" }, profileItems.map(item)) : h("p", { class: "muted" }, t("no_memories")),
    others.length ? [h("h3", {}, t("memories")), h("ul", { class: "memories" }, others.map(item))] : null);
}

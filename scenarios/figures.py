"""The figures of one scenario, computed from what the stack recorded: the person's
event log, tasks with their cards and artifacts, each task's last model context, the
memory list and profile, workspace object versions, the budget, and the simulator's own
job ledger (what the vendor was actually asked to generate). The person's journal only
says what they meant; nothing here counts what the script did itself."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from scenarios.person import Person

_DE_WORDS = frozenset(
    "der die das den dem des und ist ich du dich dir dein deine hier ein eine einen nicht "
    "mit für auf noch sind wird werden habe hast kann gut fertig bild bilder entwurf "
    "entwürfe plakat plakate sobald sie es wobei helfen generiere moment welcher gefällt "
    "am besten erledigt verstanden vergessen behalte variante wärmere katalog video".split()
)
_EN_WORDS = frozenset(
    "the a an and is i you your here it its this that not with for on still are will be "
    "have has can done image images draft drafts poster posters when they which best like "
    "generating understood forgotten keep alright variant warmer way model catalogue from "
    "how help series finished".split()
)
_WORD = re.compile(r"[a-zäöüß]+", re.I)
_OBJ = re.compile(r"\bobj_[0-9a-z]+\b")
_SPACE = re.compile(r"\s+")


def language_of(text: str) -> str:
    """'de', 'en' or '' (too short to tell): German umlauts or function words."""
    words = [w.lower() for w in _WORD.findall(text)]
    de = sum(w in _DE_WORDS for w in words) + 2 * bool(re.search(r"[äöüß]", text))
    en = sum(w in _EN_WORDS for w in words)
    if de == en:
        return ""
    return "de" if de > en else "en"


@dataclass
class VectorProbe:
    """A person's removed facts and the memory versions still active at the end: after the
    stack stops (the embedded index belongs to the worker), the memory index is searched
    for each removed fact's text."""

    user_id: str
    facts: list[tuple[str, str]]  # (why, full text of the removed memory)
    active: set[str]  # version ids of the person's active memories


@dataclass
class Figures:
    nudges: int = 0
    unneeded_confirmations: int = 0
    duplicate_generations: int = 0
    split_copies: int = 0
    stale_writes: int = 0
    resurfaced: int = 0
    lost: int = 0
    replies_in_language: int = 0
    replies_judged: int = 0
    routed_right: int = 0
    routed: int = 0
    generations: int = 0
    failure: str = ""
    why: list[str] = field(default_factory=list)
    # What the vector check (after the stack stopped) needs; not a figure itself.
    probe: VectorProbe | None = None

    @property
    def language_kept(self) -> float:
        return (
            100.0 * self.replies_in_language / self.replies_judged if self.replies_judged else 100.0
        )

    @property
    def routing_correct(self) -> float:
        return 100.0 * self.routed_right / self.routed if self.routed else 100.0

    @property
    def ok(self) -> bool:
        zero = (
            self.nudges,
            self.unneeded_confirmations,
            self.duplicate_generations,
            self.split_copies,
            self.stale_writes,
            self.resurfaced,
            self.lost,
        )
        return (
            not self.failure
            and not any(zero)
            and self.language_kept == 100.0
            and self.routing_correct == 100.0
        )

    def add(self, other: Figures) -> None:
        for name in (
            "nudges",
            "unneeded_confirmations",
            "duplicate_generations",
            "split_copies",
            "stale_writes",
            "resurfaced",
            "lost",
            "replies_in_language",
            "replies_judged",
            "routed_right",
            "routed",
            "generations",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def measure(person: Person) -> Figures:
    f = Figures()
    j = person.journal
    events = person.events()
    tasks = {
        t["task_id"]: person.get(f"/v1/tasks/{t['task_id']}")
        for t in person.get_all("/v1/tasks", "tasks", include_lightweight="true")
    }
    f.nudges = len(j.nudges)
    f.why += [f"nudge: {n}" for n in j.nudges]
    _confirmations(f, person, tasks)
    _generations(f, person, tasks)
    _routing(f, person, tasks)
    _language(f, person, events, tasks)
    _resurfacing(f, person, events, tasks)
    _stale_writes(f, person)
    _lost(f, person, tasks)
    f.probe = _probe(person)
    return f


def _probe(person: Person) -> VectorProbe | None:
    facts = [(m.why, t) for m in person.journal.marks for t in m.facts]
    if not facts:
        return None
    active = {str(m["version_id"]) for m in person.memories() if m["status"] == "active"}
    return VectorProbe(person.user_id, facts, active)


def vector_resurfaced(f: Figures, probe: VectorProbe, found: list[dict[str, Any]]) -> None:
    """Count each point of the person's memory index that a search for a removed fact's
    text finds and that is no active memory version of theirs: the removed fact (or a
    vector of it) still sits in the index, where retrieval can bring it back. `found` is
    what `Stack.memory_vectors` read for the probe's facts, in order."""
    stale: dict[str, str] = {}
    for (why, text), res in zip(probe.facts, found, strict=True):
        for hit in res["hits"]:
            if hit["id"] not in probe.active and hit["id"] not in stale:
                stale[hit["id"]] = f"{why} {text!r} still in the vector index as {hit['id']}"
                stale[hit["id"]] += f" (memory {hit['memory_id']}, score {hit['score']:.2f})"
    f.resurfaced += len(stale)
    f.why += list(stale.values())


def _confirmations(f: Figures, person: Person, tasks: dict[str, Any]) -> None:
    """A card the person did not expect, or the same question asked again in one task
    after it was answered, is an unnecessary confirmation."""
    needless = set()
    for a in person.journal.answered:
        if not a.expected:
            needless.add(a.card_id)
            f.why.append(f"unexpected {a.kind} card {a.card_id} in {a.task_id or 'main'}")
    for tid, t in tasks.items():
        seen: set[tuple[str, str]] = set()
        for c in t["cards"]:
            # One question is one call (a price card's call_id) or, without one, one title.
            payload = c.get("payload") or {}
            question = (c["kind"], str(payload.get("call_id") or c["title"]))
            if c["kind"] != "select" and question in seen:
                needless.add(c["card_id"])
                f.why.append(f"{tid} asked {c['kind']} {c['title']!r} again")
            seen.add(question)
    f.unneeded_confirmations = len(needless)  # a card counts once, whatever made it needless


def _sim_jobs(person: Person) -> list[dict[str, Any]]:
    path = person.stack.data_dir / "sim" / "jobs.json"
    try:
        return list(json.loads(path.read_text())["jobs"])
    except (OSError, ValueError, KeyError):
        return []


def _generations(f: Figures, person: Person, tasks: dict[str, Any]) -> None:
    """The vendor's ledger: two jobs for one call, or the same request twice in one task."""
    mine = [
        job
        for job in _sim_jobs(person)
        if str(job.get("idempotency_key") or "").split(":", 1)[0] in tasks
    ]
    f.generations = len(mine)
    # Object ids left out: "final poster based on draft obj_1" and "… based on draft " are
    # the same poster asked for twice (seen under faults).
    same = Counter(
        (
            str(job["idempotency_key"]).split(":", 1)[0],
            job["kind"],
            job["model"],
            _SPACE.sub("", _OBJ.sub("", json.dumps(job.get("params"), sort_keys=True))),
        )
        for job in mine
    )
    # A request the person sent k times to a task may be made k times there.
    asked = Counter((s.task_id, _SPACE.sub("", s.text)) for s in person.journal.said)
    for (tid, kind, _, params), n in same.items():
        allowed = max(1, asked[(tid, _SPACE.sub("", str(json.loads(params).get("prompt"))))])
        if n > allowed:
            f.duplicate_generations += n - allowed
            f.why.append(f"{tid}: the same {kind} generated {n} times: {params[:120]}")
    # Flow nodes: keyed flow:{run}:{node}:…; a node generated twice under one content
    # hash (the hash its run view says it ran under), in any runs of its flow, is a
    # duplicate: the result cache should have answered the second time.
    hash_of: dict[tuple[str, str], tuple[str, str]] = {}
    for obj in person.get_all("/v1/objects", "objects", type="flow"):
        for run in person.runs(obj["object_id"]):
            for nid, node in run["nodes"].items():
                hash_of[(run["run_id"], nid)] = (obj["object_id"], str(node["hash"]))
    nodes: Counter[tuple[str, str, str]] = Counter()
    for job in _sim_jobs(person):
        key = str(job.get("idempotency_key") or "").split(":")
        if len(key) >= 4 and key[0] == "flow" and (key[1], key[2]) in hash_of:
            flow, hash_ = hash_of[(key[1], key[2])]
            nodes[(flow, key[2], hash_)] += 1
    f.generations += sum(nodes.values())
    for (flow, node, hash_), n in nodes.items():
        if n > 1:
            f.duplicate_generations += n - 1
            f.why.append(f"{flow} node {node} ({hash_[:12]}) generated {n} times")


def _routing(f: Figures, person: Person, tasks: dict[str, Any]) -> None:
    """Each message against what the person meant; then split copies: one piece of work
    answered from several tasks, or a task nobody's message led to."""
    j = person.journal
    owner: dict[str, str] = {}  # task → the work it first served
    landed: dict[str, set[str]] = defaultdict(set)
    for said in j.said:
        routing = person.get(f"/v1/messages/{said.message_id}")["routing"]
        decision, tid = routing.get("decision") or "", routing.get("task_id") or ""
        f.routed += 1
        if said.work and tid:
            landed[said.work].add(tid)
        if said.expect == "answer":
            right = decision == "answer"
        elif said.expect == "existing":
            right = decision == "existing" and tid == j.works.get(said.work)
        else:  # new work: a task of its own, not one that already served other work
            right = decision == said.expect and tid not in owner
        right = right and not said.clarified  # asking which task is a miss when it was clear
        if tid and tid not in owner:
            owner[tid] = said.work
        if right:
            f.routed_right += 1
        else:
            f.why.append(
                f"routing {said.text!r}: {decision} {tid} (wanted {said.expect} {said.work}"
                f"{', asked which' if said.clarified else ''})"
            )
    for work, tids in landed.items():
        if len(tids) > 1:
            f.split_copies += len(tids) - 1
            f.why.append(f"{work} split over {sorted(tids)}")
    for tid in tasks:
        if tid not in owner:
            f.split_copies += 1
            f.why.append(f"{tid} ({tasks[tid]['goal'][:60]!r}) came from no message")


def _replies(
    person: Person, events: list[dict[str, Any]], tasks: dict[str, Any]
) -> list[dict[str, Any]]:
    mine = {s.message_id for s in person.journal.said}
    return [
        e
        for e in events
        if e["type"] == "task.reply"
        and (e["data"].get("task_id") in tasks or e["data"].get("message_id") in mine)
    ]


def _language(
    f: Figures, person: Person, events: list[dict[str, Any]], tasks: dict[str, Any]
) -> None:
    lang = person.journal.lang
    for e in _replies(person, events, tasks):
        said = language_of(e["data"]["text"])
        if not said:
            continue  # "OK." is in every language
        f.replies_judged += 1
        if said == lang:
            f.replies_in_language += 1
        else:
            f.why.append(f"reply in {said}: {e['data']['text'][:80]!r}")
    for tid, t in tasks.items():
        f.replies_judged += 1
        if t["language"] == lang:
            f.replies_in_language += 1
        else:
            f.why.append(f"{tid} keeps language {t['language']!r}")


def _has(text: str, words: tuple[str, ...]) -> bool:
    return any(re.search(rf"\b{re.escape(w)}\b", text, re.I) for w in words)


def _resurfacing(
    f: Figures, person: Person, events: list[dict[str, Any]], tasks: dict[str, Any]
) -> None:
    """After a fact was forgotten (or corrected away), it may not come back: not in a reply,
    not in any context built afterwards, not in a task summary, not in memory or profile."""
    if not person.journal.marks:
        return
    memories = [m for m in person.memories() if m["status"] == "active"]
    profile = json.dumps(person.get("/v1/memory/profile").get("items", []), ensure_ascii=False)
    for mark in person.journal.marks:
        later = [e for e in events if e["seq"] > mark.seq]
        for e in later:
            if e["type"] == "task.reply" and _has(e["data"]["text"], mark.words):
                f.resurfaced += 1
                f.why.append(f"{mark.why} {mark.words} in a reply: {e['data']['text'][:80]!r}")
        # A reminder's line (`nudge` in its data) is said by the nudge round, not by a step
        # of the task: it builds no context.
        stepped = {
            e["data"].get("task_id")
            for e in later
            if e["type"] in ("task.reply", "task.status") and "nudge" not in e["data"]
        }
        for tid in sorted(t for t in stepped if t in tasks and t != mark.own_task):
            layers = person.get(f"/v1/tasks/{tid}/context").get("layers", [])
            for layer in layers:
                if _has(layer["text"], mark.words):
                    f.resurfaced += 1
                    f.why.append(
                        f"{mark.why} {mark.words} in {tid}'s context layer {layer['name']}"
                    )
        for tid, t in tasks.items():
            if tid != mark.own_task and _has(t["summary"], mark.words):
                f.resurfaced += 1
                f.why.append(f"{mark.why} {mark.words} in {tid}'s summary")
        for m in memories:
            if _has(m["content"], mark.words):
                f.resurfaced += 1
                f.why.append(
                    f"{mark.why} {mark.words} in memory {m['memory_id']}: {m['content']!r}"
                )
        if _has(profile, mark.words):
            f.resurfaced += 1
            f.why.append(f"{mark.why} {mark.words} in the profile")


def _stale_writes(f: Figures, person: Person) -> None:
    """An agent's version that puts back what the person had just changed: it wrote on a
    version older than the person's. Flows by node, documents by line."""
    for obj in person.get_all("/v1/objects", "objects"):
        if obj["type"] not in ("document", "flow"):
            continue
        oid = obj["object_id"]
        versions = person.get_all(f"/v1/objects/{oid}/versions", "versions")
        if len(versions) < 2:
            continue
        content = {
            v["version"]: person.get(f"/v1/objects/{oid}", version=v["version"])["content"]
            for v in versions
        }
        by = {v["version"]: v["created_by"] for v in versions}
        parts = _nodes if obj["type"] == "flow" else _lines
        for k in sorted(content):
            if k == 1 or by[k].startswith("task:"):
                continue
            before, mine = parts(content[k - 1]), parts(content[k])
            changed = {p for p in set(before) | set(mine) if before.get(p) != mine.get(p)}
            for later in (n for n in sorted(content) if n > k and by[n].startswith("task:")):
                after = parts(content[later])
                reverted = [p for p in changed if after.get(p) == before.get(p)]
                if reverted:
                    f.stale_writes += 1
                    f.why.append(
                        f"{oid} v{later} ({by[later]}) undid the person's v{k}: {reverted[:3]}"
                    )
                break  # the next agent version is the one that must have seen the change


def _nodes(content: dict[str, Any]) -> dict[str, str]:
    return {n: json.dumps(v, sort_keys=True) for n, v in (content.get("nodes") or {}).items()}


def _lines(content: dict[str, Any]) -> dict[str, str]:
    return {line: line for line in str(content.get("text", "")).splitlines() if line.strip()}


def _lost(f: Figures, person: Person, tasks: dict[str, Any]) -> None:
    """Nothing lost: every message routed, every job the vendor finished delivered as an
    artifact of its task, nothing left reserved."""
    for said in person.journal.said:
        if not person.get(f"/v1/messages/{said.message_id}")["routing"].get("decision"):
            f.lost += 1
            f.why.append(f"message never routed: {said.text!r}")
    done: Counter[str] = Counter(
        str(job["idempotency_key"]).split(":", 1)[0]
        for job in _sim_jobs(person)
        if job["status"] == "succeeded"
        and str(job.get("idempotency_key") or "").split(":", 1)[0] in tasks
    )
    for tid, n in done.items():
        have = len(tasks[tid]["artifacts"])
        if have < n:
            f.lost += n - have
            f.why.append(f"{tid}: {n} jobs succeeded upstream, {have} artifacts")
    budget = person.get("/v1/budget")
    if budget.get("reserved"):
        f.lost += 1
        f.why.append(f"money still reserved at the end: {budget['reserved']}")

"""The simulated person: says scripted things, waits for what they asked for, answers the
cards that appear by rules, and pokes a task with "continue" only when it stalls.

Everything goes over the public HTTP API with the person's token. The person keeps a
journal of what they did and what they expected (which work each message is about, the
decision a good router would make, the cards they expected to be asked); the figures are
then computed from what the stack recorded, compared with this journal.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from lomo.states import ACTIVE_FLOW_RUN, CLOSED_TASK, TERMINAL_TASK, CardStatus, TaskStatus
from scenarios.stack import Stack

Task = dict[str, Any]
Pred = Callable[[Task], bool]
NUDGE = {"en": "continue", "de": "weiter"}
IDLE_GRACE_S = 8.0  # a task idle without a question this long has stalled
MAX_NUDGES = 3


class ScenarioFailure(AssertionError):
    """The story could not go on: the platform never reached what the person waited for."""


@dataclass
class Said:
    message_id: str
    text: str
    work: str  # which piece of work the person means ("" for none)
    expect: str  # the decision a good router makes: new|lightweight|existing|answer
    decision: str = ""
    task_id: str = ""
    clarified: bool = False


@dataclass
class Answered:
    card_id: str
    kind: str
    task_id: str
    expected: bool
    action: str


@dataclass
class Mark:
    """A fact the person removed: after event `seq`, none of `words` may show up again."""

    seq: int
    words: tuple[str, ...]
    why: str  # "forgotten" | "corrected"
    own_task: str = ""  # the forget request's own task (its goal quotes the words)
    facts: tuple[str, ...] = ()  # the removed memories' full texts (searched in the vectors)


@dataclass
class Journal:
    lang: str
    said: list[Said] = field(default_factory=list)
    answered: list[Answered] = field(default_factory=list)
    nudges: list[str] = field(default_factory=list)
    works: dict[str, str] = field(default_factory=dict)  # work → its task, once known
    marks: list[Mark] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def has_open(kind: str) -> Pred:
    return lambda t: any(c["kind"] == kind and c["status"] == CardStatus.OPEN for c in t["cards"])


def completed(t: Task) -> bool:
    return t["status"] == TaskStatus.COMPLETED and not any(
        c["status"] == CardStatus.OPEN for c in t["cards"]
    )


class Person:
    def __init__(
        self,
        stack: Stack,
        token: str,
        lang: str,
        within: float = 240.0,
        patience: float = 90.0,
        idle_grace: float = IDLE_GRACE_S,
    ) -> None:
        self.stack = stack
        self.user_id = stack.users.get(token, "")
        self.lang = lang
        self.within = within
        self.patience = patience  # a busy task silent this long has stalled
        self.idle_grace = idle_grace  # an idle task without a question this long has too
        self.journal = Journal(lang)
        self._events: list[dict[str, Any]] = []
        self.http = httpx.Client(
            base_url=stack.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def close(self) -> None:
        self.http.close()

    # -- HTTP with patience: under faults the api may answer 5xx or not at all briefly --
    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        deadline = time.monotonic() + 120
        while True:
            try:
                r = self.http.request(method, path, **kw)
                if r.status_code < 500:
                    return r
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise ScenarioFailure(f"{method} {path}: the api did not answer for 120 s")
            time.sleep(0.5)

    def get(self, path: str, **params: Any) -> Any:
        r = self.request("GET", path, params=params)
        if r.status_code != 200:
            raise ScenarioFailure(f"GET {path}: {r.status_code} {r.text[:300]}")
        return r.json()

    def get_all(self, path: str, key: str, **params: Any) -> list[Any]:
        """Every row of a paged list, following `next` (a figure must see the whole list)."""
        rows: list[Any] = []
        params = {**params, "limit": 200}
        while True:
            page = self.get(path, **params)
            rows += page[key]
            if not page["next"]:
                return rows
            params["cursor"] = page["next"]

    def task(self, work: str) -> Task:
        return self.get(f"/v1/tasks/{self.journal.works[work]}")

    def events(self) -> list[dict[str, Any]]:
        """The person's whole event log so far (read on from the last one seen)."""
        after = self._events[-1]["seq"] if self._events else 0
        body = self.request("GET", "/v1/events", params={"once": "true", "after": after}).text
        self._events += [
            json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")
        ]
        return self._events

    def last_seq(self) -> int:
        events = self.events()
        return int(events[-1]["seq"]) if events else 0

    # -- saying things ---------------------------------------------------------------
    def say(self, text: str, work: str = "", expect: str = "new") -> Said:
        """Send one message through the one entry and wait until it is routed; a clarify
        card is answered with the task the person means."""
        cid = f"person-{uuid.uuid4().hex}"  # a retried POST must not become two messages
        r = self.request("POST", "/v1/messages", json={"text": text, "client_message_id": cid})
        if r.status_code != 202:
            raise ScenarioFailure(f"message refused: {r.status_code} {r.text[:300]}")
        said = Said(str(r.json()["message_id"]), text, work, expect)
        self.journal.said.append(said)
        deadline = time.monotonic() + self.within
        while time.monotonic() < deadline:
            routing = self.get(f"/v1/messages/{said.message_id}")["routing"]
            decision = routing.get("decision") or ""
            if decision == "clarify" and not said.clarified:
                self._clarify(said)
            elif decision and (decision == "answer" or routing.get("task_id")):
                said.decision, said.task_id = decision, routing.get("task_id") or ""
                if work and said.task_id and work not in self.journal.works:
                    self.journal.works[work] = said.task_id
                return said
            time.sleep(0.3)
        raise ScenarioFailure(f"message never routed: {text!r}")

    def _clarify(self, said: Said) -> None:
        for c in self.get_all("/v1/cards", "cards", status="open"):
            if c["kind"] != "clarify":
                continue
            want = self.journal.works.get(said.work, "")
            option = next((o for o in c["options"] if o["id"] == want), None)
            body = {"action": "select", "option_id": option["id"]} if option else None
            self._answer(c, body or {"action": "select", "option_id": c["options"][0]["id"]}, False)
            said.clarified = True

    def _answer(self, card: dict[str, Any], body: dict[str, str], expected: bool) -> None:
        r = self.request("POST", f"/v1/cards/{card['card_id']}/actions", json=body)
        if r.status_code not in (200, 409):  # 409: answered already (a retried POST)
            raise ScenarioFailure(f"card answer refused: {r.status_code} {r.text[:300]}")
        self.journal.answered.append(
            Answered(
                card["card_id"], card["kind"], card.get("task_id") or "", expected, body["action"]
            )
        )

    # -- waiting for work ------------------------------------------------------------
    def until(self, work: str, goal: Pred, answers: dict[str, Any] | None = None) -> Task:
        """Wait until the work's task satisfies `goal`, answering its cards on the way:
        `answers` maps the card kinds the person expects to their answer ("confirm", or
        the index of the option to select). Any other card is answered too (a person
        answers what they are asked) but counted as unnecessary. A task that stalls
        without a question gets one "continue", counted as a nudge."""
        answers = answers or {}
        deadline = time.monotonic() + self.within
        last_sig: tuple[Any, ...] = ()
        changed = time.monotonic()
        nudges = 0
        while time.monotonic() < deadline:
            t = self.task(work)
            if goal(t):
                return t
            open_cards = [c for c in t["cards"] if c["status"] == CardStatus.OPEN]
            for c in open_cards:
                self._answer(c, self._reply_to(c, answers), c["kind"] in answers)
            sig = (t["status"], t["turn"], len(t["cards"]), len(t["artifacts"]), t["updated_at"])
            if sig != last_sig or open_cards:
                last_sig, changed = sig, time.monotonic()
            idle = t["status"] in {TaskStatus.WAITING_USER, *TERMINAL_TASK} and not open_cards
            quiet = time.monotonic() - changed
            if quiet > self.idle_grace and self._work_under_way(t):
                changed = time.monotonic()  # the person sees progress: no reason to poke
            elif (idle and quiet > self.idle_grace) or quiet > self.patience:
                if nudges == MAX_NUDGES or t["status"] in {TaskStatus.FAILED, *CLOSED_TASK}:
                    break
                nudges += 1
                self.journal.nudges.append(f"{work}: {t['status']} {t['status_reason']}".strip())
                self.request(
                    "POST", f"/v1/tasks/{t['task_id']}/messages", json={"text": NUDGE[self.lang]}
                )
                changed = time.monotonic()
            time.sleep(0.4)
        t = self.task(work)
        raise ScenarioFailure(
            f"{work} never got there: status {t['status']} ({t['status_reason']}), "
            f"checklist {[(i['title'], i['status']) for i in t['checklist']]}, "
            f"cards {[(c['kind'], c['status']) for c in t['cards']]}"
        )

    def _work_under_way(self, t: Task) -> bool:
        """Jobs the task waits on, or a flow run of the task still going: the task will be
        woken when they end, so the person waits as they would watching the app."""
        if t["waiting_on"]:
            return True
        for flow in self.get_all("/v1/objects", "objects", type="flow"):
            for run in self.runs(flow["object_id"]):
                if run["task_id"] == t["task_id"] and run["status"] in ACTIVE_FLOW_RUN:
                    return True
        return False

    @staticmethod
    def _reply_to(card: dict[str, Any], answers: dict[str, Any]) -> dict[str, str]:
        want = answers.get(card["kind"])
        if card["kind"] in ("select", "clarify"):
            index = want if isinstance(want, int) else 0
            options = card["options"]
            return {"action": "select", "option_id": options[min(index, len(options) - 1)]["id"]}
        if card["kind"] in ("forget", "delete") and want is None:
            return {"action": "reject"}  # never let an unasked-for card destroy anything
        return {"action": str(want or "confirm")}

    # -- the person's other ways in --------------------------------------------------
    def create_flow(self, name: str, nodes: dict[str, Any]) -> str:
        body = {"type": "flow", "name": name, "content": {"nodes": nodes}}
        r = self.request("POST", "/v1/objects", json=body)
        if r.status_code != 201:
            raise ScenarioFailure(f"flow refused: {r.status_code} {r.text[:300]}")
        return str(r.json()["object_id"])

    def edit_flow(self, flow_id: str, base_version: int, nodes: dict[str, Any]) -> int:
        r = self.request(
            "PATCH", f"/v1/objects/{flow_id}", json={"base_version": base_version, "nodes": nodes}
        )
        if r.status_code != 200:
            raise ScenarioFailure(f"flow edit refused: {r.status_code} {r.text[:300]}")
        return int(r.json()["version"])

    def create_document(self, name: str, text: str) -> str:
        body = {"type": "document", "name": name, "content": {"text": text}}
        r = self.request("POST", "/v1/objects", json=body)
        if r.status_code != 201:
            raise ScenarioFailure(f"document refused: {r.status_code} {r.text[:300]}")
        return str(r.json()["object_id"])

    def edit_document(self, doc_id: str, base_version: int, old: str, new: str) -> int:
        body = {"base_version": base_version, "edits": [{"old": old, "new": new}]}
        r = self.request("PATCH", f"/v1/objects/{doc_id}", json=body)
        if r.status_code != 200:
            raise ScenarioFailure(f"document edit refused: {r.status_code} {r.text[:300]}")
        return int(r.json()["version"])

    def runs(self, flow_id: str) -> list[dict[str, Any]]:
        return self.get_all(f"/v1/objects/{flow_id}/runs", "runs")

    def wait_run(self, flow_id: str, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + self.within
        while time.monotonic() < deadline:
            runs = self.runs(flow_id)
            if runs and pred(runs[0]):
                return runs[0]
            time.sleep(0.2)
        raise ScenarioFailure(f"the run of {flow_id} never got there: {self.runs(flow_id)[:1]}")

    def simulator(self, **faults: Any) -> None:
        """The vendor's pace (the person cannot change it; the harness sets the scene)."""
        url = f"{self.stack.sim_url}/sim/faults"
        self.stack.scene = dict(faults)
        auth = self.stack.sim_auth
        r = (
            httpx.post(url, json=faults, headers=auth, timeout=10)
            if faults
            else httpx.delete(url, headers=auth, timeout=10)
        )
        r.raise_for_status()

    def free_amount(self, cents: int) -> None:
        """The amount a paid operation may cost without asking (0: every price is asked)."""
        body = {"free_confirm_amount": cents}
        r = self.request("PUT", "/v1/budget/settings", json=body)
        if r.status_code != 200:
            raise ScenarioFailure(f"budget setting refused: {r.status_code} {r.text[:300]}")

    def days_pass(self, days: float) -> None:
        self.stack.days_pass(days)

    def memories(self) -> list[dict[str, Any]]:
        return self.get_all("/v1/memory", "memories")

    def wait_memory(self, word: str, present: bool = True) -> dict[str, Any] | None:
        """Background extraction and cascades take a moment: wait for the memory list."""
        deadline = time.monotonic() + self.within
        while time.monotonic() < deadline:
            hits = [
                m
                for m in self.memories()
                if m["status"] == "active" and word.lower() in m["content"].lower()
            ]
            if hits and present:
                return hits[0]
            if not hits and not present:
                return None
            time.sleep(0.5)
        raise ScenarioFailure(f"memory with {word!r} {'never came' if present else 'stayed'}")

    def correct(self, memory_id: str, content: str, old_words: tuple[str, ...]) -> None:
        old = tuple(m["content"] for m in self.memories() if m["memory_id"] == memory_id)
        r = self.request("POST", f"/v1/memory/{memory_id}/correct", json={"content": content})
        if r.status_code != 200:
            raise ScenarioFailure(f"correction refused: {r.status_code} {r.text[:300]}")
        self.journal.marks.append(Mark(self.last_seq(), old_words, "corrected", facts=old))

    def forgotten(self, words: tuple[str, ...], own_task: str) -> None:
        facts = tuple(
            m["content"]
            for m in self.memories()
            if m["status"] == "active" and any(w.lower() in m["content"].lower() for w in words)
        )
        self.journal.marks.append(Mark(self.last_seq(), words, "forgotten", own_task, facts))

"""The offline stand-in's short film: storyboard → six shots → clips → music → edit, as a
flow the platform runs as a DAG. English and German.

Deterministic rules over what a real model would read: the person's words, the last
tool results and the `[runtime] flow run …` lines of the dynamic tail.
- A storyboard in the message: write it as a document, build the flow on it, run it.
- "make a short film from my storyboard obj_…" (a flow): run that flow.
- While a run is on: say how far it is, or that its price card waits for the person;
  when it ended with stale nodes (the person changed shots mid-run) run it again, which
  redoes just those; when it ended, say that the film is ready and where.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llm.types import ModelRequest, ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from standin.tasks import read_view

_FILM = re.compile(r"\b(film|movie|kurzfilm\w*)\b", re.IGNORECASE)
_OBJECT = re.compile(r"\bobj_[0-9a-z]+\b")
_ITEM = re.compile(r"(?:^|\s)\d+[.)]\s+")
_RUN = re.compile(
    r"flow run (?P<run>\S+) of (?P<flow>obj_[0-9a-z]+) \(v\d+\): (?P<status>\w+), "
    r"(?P<done>\d+) of (?P<total>\d+) nodes done(?P<rest>.*)"
)
SHOTS = 6
# A finished run's results in its progress line ("edit → obj_…").
_RESULT = re.compile(r"→ (obj_[0-9a-z]+)")
_IDS = re.compile(r"\b(?:obj|tsk|ord|crd|chk|frn)_[0-9a-z]+\b")
_SAY = {
    "step": ("Short film from the storyboard", "Kurzfilm aus dem Storyboard"),
    "started": (
        "I'm making the film from your storyboard.",
        "Ich mache den Film aus deinem Storyboard.",
    ),
    "running": (
        "The film is being made: {done} of {total} steps done.",
        "Der Film entsteht: {done} von {total} Schritten fertig.",
    ),
    "waiting_price": (
        "Please confirm the price of the film on its card; nothing is spent before.",
        "Bitte bestätige den Preis des Films auf der Karte; vorher wird nichts ausgegeben.",
    ),
    "ready": (
        "Your short film is ready; the final cut is with this task's results.",
        "Dein Kurzfilm ist fertig; der Endschnitt liegt bei den Ergebnissen dieser Aufgabe.",
    ),
    "failed": ("The film could not be finished: {rest}", "Der Film wurde nicht fertig: {rest}"),
    "declined": ("Alright, the film is not made.", "Gut, der Film wird nicht gemacht."),
}


def film_flow(text: str) -> str | None:
    """The flow a film request names (obj_…), if any."""
    m = _OBJECT.search(text)
    return m.group(0) if m and _FILM.search(text) else None


def is_film_task(text: str) -> bool:
    """A film made as a production flow: from a storyboard object (obj_…) or one written
    out shot by shot in the message. A storyboard with counts ("five frames and one
    clip") is a plan of those parts (standin/planner.py), not a flow."""
    if not _FILM.search(text):
        return False
    return bool(_OBJECT.search(text) or len(_ITEM.findall(" " + text)) >= 2)


def shots_of(text: str) -> list[str]:
    """The storyboard's numbered shots; without numbers, six shots of the whole text."""
    body = text.split(":", 1)[1] if ":" in text else text
    items = [p.strip(" .") for p in _ITEM.split(" " + body) if p.strip(" .")]
    if len(items) < SHOTS:
        items = [f"shot {n} of: {body.strip()[:160]}" for n in range(1, SHOTS + 1)]
    return items[:SHOTS]


def film_nodes(storyboard_id: str, shots: list[str]) -> dict[str, Any]:
    nodes: dict[str, Any] = {
        "storyboard": {"type": "document", "params": {"object_id": storyboard_id}, "inputs": []}
    }
    for n, shot in enumerate(shots, 1):
        nodes[f"shot{n}"] = {"type": "image", "params": {"prompt": shot}, "inputs": ["storyboard"]}
        nodes[f"clip{n}"] = {
            "type": "video",
            "params": {"prompt": f"animate: {shot}", "duration_s": 4},
            "inputs": [f"shot{n}"],
        }
    nodes["music"] = {
        "type": "audio",
        "params": {"prompt": "a calm score for the film", "duration_s": 20},
        "inputs": ["storyboard"],
    }
    clips = [f"clip{n}" for n in range(1, len(shots) + 1)]
    nodes["edit"] = {"type": "edit", "params": {"prompt": "final cut"}, "inputs": [*clips, "music"]}
    return nodes


def film_step(request: ModelRequest, lang: str, text: str) -> ModelResponse:
    """Once the run has made the film, a checklist step carries the final cut: with it
    done the task is complete, instead of waiting on the person with nothing to answer.
    (Before, the task has no checklist, so it waits for the run's wake-ups.)"""
    de = lang == "de"
    tail, results = _read(request)
    for r in results:
        if r.get("status") in ("started", "already_running"):
            return text_reply(_SAY["started"][de], request)
        if r.get("type") == "flow" and r.get("object_id"):
            return tool_call(request, "run_flow", {"object_id": r["object_id"]})
        if r.get("type") == "document" and r.get("object_id"):
            nodes = film_nodes(str(r["object_id"]), shots_of(text))
            return tool_call(request, "create_flow", {"name": "Short film", "nodes": nodes})
    flow_id = film_flow(text)
    runs = [m for m in _RUN.finditer(tail) if flow_id is None or m["flow"] == flow_id]
    titles = _SAY["step"]
    step = next((i for i in read_view(request, lang, text, text).items if i.title in titles), None)
    if not runs:
        if flow_id:
            return tool_call(request, "run_flow", {"object_id": flow_id})
        return tool_call(request, "create_document", {"name": "Storyboard", "text": text})
    newest = runs[0]  # the runtime lists the newest run first
    status, rest = newest["status"], newest["rest"]
    if status == "succeeded" and "stale" in rest:
        # The person changed shots mid-run: run again, which redoes just those.
        return tool_call(request, "run_flow", {"object_id": newest["flow"]})
    cut = _RESULT.findall(rest)
    if status == "succeeded" and cut and step is None:
        return tool_call(request, "update_checklist", {"add": [{"title": _SAY["step"][de]}]})
    if status == "succeeded" and cut and step is not None and step.status != "done":
        update = {"id": step.id, "status": "done", "artifacts": cut}
        return tool_call(request, "update_checklist", {"update": [update]})
    if status == "succeeded":
        # The app links the results; the reply names the work, never its ids.
        return text_reply(_SAY["ready"][de], request)
    if status in ("failed", "declined", "waiting_price"):
        plain = " ".join(_IDS.sub("", rest).split()).strip("; ")
        return text_reply(_SAY[status][de].format(rest=plain), request)
    return text_reply(
        _SAY["running"][de].format(done=newest["done"], total=newest["total"]), request
    )


def _read(request: ModelRequest) -> tuple[str, list[dict[str, Any]]]:
    tail, results = "", []
    last = request.messages[-1] if request.messages else None
    for b in last.content if last else []:
        if isinstance(b, TextBlock) and b.text.startswith("[runtime]"):
            tail += b.text + "\n"
        elif isinstance(b, ToolResultBlock):
            try:
                value = json.loads(b.content)
            except ValueError:
                continue
            if isinstance(value, dict):
                results.append(value)
    return tail, results


def tool_call(request: ModelRequest, name: str, args: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        content=[
            ToolUseBlock(
                id=f"toolu_{request.purpose}_{len(request.messages):04d}", name=name, input=args
            )
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=_tokens(request), output_tokens=40),
        model="lomo-offline",
    )


def text_reply(text: str, request: ModelRequest) -> ModelResponse:
    return ModelResponse(
        content=[TextBlock(text=text)],
        stop_reason="end_turn",
        usage=Usage(input_tokens=_tokens(request), output_tokens=len(text) // 4 + 1),
        model="lomo-offline",
    )


def _tokens(request: ModelRequest) -> int:
    return sum(len(str(m)) for m in request.messages) // 4

"""`make plans-eval`: multi-part requests driven through the real embedded stack and the
finished tasks judged against what each request names (docs/testing.md#plans-eval).

Each request is said by a new person through the one entry. The person confirms the
price, picks the first draft and answers nothing else; the task must then finish. The
judge reads the finished task over the public API: the checklist steps after the pick
are the plan's parts, each must hold the named count of results in the named medium, in
the named order, with nothing unnamed added, and every clip or audio piece must last the
named length within a second (a length the catalogue cannot make in one piece may be made
of pieces that add up to it). A request the platform must ask about instead (`ask`) is
judged by the card it puts in front of the person before anything is paid for.

    python -m scenarios.plans_eval tests/data/heldout_plans_v1.jsonl [--people 6]
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import sys
import tempfile
import time
import wave
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lomo.states import CardKind, CardStatus, EventType, TaskStatus
from scenarios import stack as stacks
from scenarios.person import Person, ScenarioFailure

MEDIA = {"image/": "image", "video/": "video", "audio/": "audio", "model/": "3d"}
ASKING = {CardKind.CONFIRM, CardKind.SELECT, CardKind.CLARIFY}
TOLERANCE_S = 1.0


@dataclass
class Case:
    id: str
    lang: str
    text: str
    parts: list[dict[str, Any]]
    ask: str | None = None

    @property
    def category(self) -> str:
        if self.ask:
            return f"ask: {self.ask}"
        media = {p["medium"] for p in self.parts}
        return "mixed media" if len(media) > 1 else f"one medium ({next(iter(media))})"


@dataclass
class Verdict:
    case: Case
    ok: bool
    why: str = ""
    made: list[str] = field(default_factory=list)  # what the task made, part by part
    seconds: float = 0.0
    transcript: list[str] = field(default_factory=list)


def load(path: Path) -> list[Case]:
    rows = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
    return [Case(r["id"], r["lang"], r["text"], r.get("parts") or [], r.get("ask")) for r in rows]


# --- media lengths, read off the files ------------------------------------------------
def wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as w:
        return w.getnframes() / float(w.getframerate())


def mp4_seconds(data: bytes) -> float:
    """The movie header's duration over its timescale (ISO BMFF `mvhd`)."""
    at = data.find(b"mvhd")
    if at < 0:
        raise ValueError("no mvhd box")
    version = data[at + 4]
    if version == 1:
        scale, length = struct.unpack(">IQ", data[at + 24 : at + 36])
    else:
        scale, length = struct.unpack(">II", data[at + 16 : at + 24])
    return length / float(scale)


def seconds_of(medium: str, data: bytes) -> float | None:
    if medium == "audio":
        return wav_seconds(data)
    if medium == "video":
        return mp4_seconds(data)
    return None


# --- the judge ------------------------------------------------------------------------
@dataclass
class Piece:
    medium: str
    seconds: float | None


def parts_made(p: Person, task: dict[str, Any]) -> list[list[Piece]]:
    """The results of each checklist step after the person's pick, in order; a task
    without a checklist (one piece, made at once) has its results as one part."""
    items = task["checklist"]
    pick = next((k for k, i in enumerate(items) if i["requires_confirmation"]), -1)
    groups = [i["artifacts"] for i in items[pick + 1 :]]
    if not items and task["artifacts"]:
        groups = [task["artifacts"]]
    out: list[list[Piece]] = []
    for artifacts in groups:
        pieces = []
        for obj_id in artifacts:
            obj = p.get(f"/v1/objects/{obj_id}")
            media_type = str(obj["content"].get("media_type", ""))
            medium = next((m for k, m in MEDIA.items() if media_type.startswith(k)), media_type)
            blob = p.request("GET", f"/v1/objects/{obj_id}/blob").content
            pieces.append(Piece(medium, seconds_of(medium, blob)))
        out.append(pieces)
    return out


def judge_part(want: dict[str, Any], got: list[Piece]) -> str:
    """Why the made part is not the named one ("" when it is)."""
    count, medium, length = want.get("count"), want["medium"], want.get("duration_s")
    if not got:
        return "nothing made"
    if any(x.medium != medium for x in got):
        return f"media {sorted({x.medium for x in got})}, asked {medium}"
    if count is not None and len(got) != count:
        # One named piece of a length the catalogue makes only in parts: its parts count.
        if not (count == 1 and length and _adds_up(got, length)):
            return f"{len(got)} pieces, asked {count}"
    if length and medium in ("video", "audio"):
        lengths = [x.seconds or 0.0 for x in got]
        each = all(abs(s - length) <= TOLERANCE_S for s in lengths)
        if not each and not (count == 1 and _adds_up(got, length)):
            return f"lengths {[round(s, 1) for s in lengths]} s, asked {length} s"
    return ""


def _adds_up(got: list[Piece], length: float) -> bool:
    return abs(sum(x.seconds or 0.0 for x in got) - length) <= TOLERANCE_S


def describe(made: list[list[Piece]]) -> list[str]:
    out = []
    for pieces in made:
        kinds = Counter(x.medium for x in pieces)
        lengths = [round(x.seconds, 1) for x in pieces if x.seconds is not None]
        text = ", ".join(f"{n} {m}" for m, n in kinds.items()) or "nothing"
        out.append(text + (f" {lengths} s" if lengths else ""))
    return out


def judge(case: Case, made: list[list[Piece]]) -> str:
    if len(made) != len(case.parts):
        return f"{len(made)} parts made, {len(case.parts)} named"
    for k, (want, got) in enumerate(zip(case.parts, made, strict=True)):
        if why := judge_part(want, got):
            return f"part {k + 1} ({want.get('word', want['medium'])}): {why}"
    return ""


# --- one request, end to end ----------------------------------------------------------
def run_case(st: stacks.Stack, case: Case, within: float) -> Verdict:
    p = Person(st, st.new_person(f"plans-{case.id}"), case.lang, within=within)
    try:
        verdict = _drive(p, case)
        said = {x.message_id: x.text for x in p.journal.said}
        verdict.transcript = transcript(p.events(), said)
        return verdict
    finally:
        p.close()


def _drive(p: Person, case: Case) -> Verdict:
    started = time.monotonic()
    try:
        said = p.say(case.text, work="plan")
        if not said.task_id:
            return Verdict(case, False, f"routed {said.decision}, no task", [], _since(started))
        if case.ask:
            return _judge_ask(p, case, started)
        task = p.until("plan", _finished, {CardKind.PRICE: "confirm", CardKind.SELECT: 0})
        made = parts_made(p, task)
        why = judge(case, made)
        return Verdict(case, not why, why, describe(made), _since(started))
    except ScenarioFailure as e:
        return Verdict(case, False, str(e)[:300], [], _since(started))


def transcript(events: list[dict[str, Any]], said: dict[str, str]) -> list[str]:
    """What the person saw, in order: their messages, the replies, the cards and their
    answers, what was made."""
    lines = []
    for e in events:
        data, kind = e.get("data") or {}, e.get("type")
        if kind == EventType.MESSAGE_RECEIVED:
            text = said.get(str(data.get("message_id")), "") or data.get("text") or "(a poke)"
            lines.append(f"person: {text}")
        elif kind == EventType.TASK_REPLY:
            lines.append(f"lomo: {data.get('text', '')}")
        elif kind == EventType.CARD_CREATED:
            price = f" [{data['price_cents'] / 100:.2f} EUR]" if data.get("price_cents") else ""
            lines.append(f"card ({data.get('kind')}){price}: {data.get('title', '')}")
        elif kind == EventType.CARD_ANSWERED:
            lines.append(f"person answers: {data.get('action', '')}")
        elif kind == EventType.TASK_CHECKLIST:
            steps = [f"[{i.get('status')}] {i.get('title')}" for i in data.get("checklist", [])]
            lines.append("checklist: " + "; ".join(steps))
    return lines


def _finished(t: dict[str, Any]) -> bool:
    return t["status"] == TaskStatus.COMPLETED and not any(
        c["status"] == CardStatus.OPEN for c in t["cards"]
    )


def _judge_ask(p: Person, case: Case, started: float) -> Verdict:
    """The task must put a question to the person before it pays for anything."""
    deadline = time.monotonic() + p.within
    while time.monotonic() < deadline:
        t = p.task("plan")
        if t["artifacts"]:
            return Verdict(case, False, "made results without asking", [], _since(started))
        for c in t["cards"]:
            if c["status"] == CardStatus.OPEN and c["kind"] in ASKING:
                return Verdict(case, True, "", [f"asked: {c['title']}"], _since(started))
            if c["status"] == CardStatus.OPEN and c["kind"] == CardKind.PRICE:
                return Verdict(case, False, "priced a plan instead of asking", [], _since(started))
        if t["status"] == TaskStatus.COMPLETED:
            return Verdict(case, False, "finished without asking", [], _since(started))
        time.sleep(0.5)
    return Verdict(case, False, "no question within the wait", [], _since(started))


def _since(t0: float) -> float:
    return round(time.monotonic() - t0, 1)


# --- the report -----------------------------------------------------------------------
def table(verdicts: list[Verdict]) -> str:
    rows: dict[str, list[bool]] = {}
    for v in verdicts:
        for key in ("all", v.case.lang, v.case.category):
            rows.setdefault(key, []).append(v.ok)
    lines = ["| set | right | of | share |", "|---|---:|---:|---:|"]
    for key, oks in rows.items():
        lines.append(f"| {key} | {sum(oks)} | {len(oks)} | {100 * sum(oks) / len(oks):.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--people", type=int, default=6, help="requests driven at once")
    ap.add_argument("--within", type=float, default=420.0, help="seconds a request may take")
    ap.add_argument("--only", default="", help="comma-separated case ids")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--transcripts", action="store_true", help="print what each person saw")
    args = ap.parse_args(argv)
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="lomo-plans-eval-"))
    st = stacks.start(root / "stack")
    worst = 100.0
    try:
        for path in args.sets:
            cases = load(path)
            if args.only:
                cases = [c for c in cases if c.id in args.only.split(",")]
            with ThreadPoolExecutor(args.people) as pool:
                verdicts = list(pool.map(lambda c: run_case(st, c, args.within), cases))
            print(f"\n## {path.name}\n\n{table(verdicts)}\n")
            for v in verdicts:
                mark = "ok  " if v.ok else "MISS"
                print(f"{mark} {v.case.id} ({v.seconds:.0f} s) {v.case.text}")
                print(f"       made: {'; '.join(v.made) or '-'}")
                if v.why:
                    print(f"       why:  {v.why}")
                for line in v.transcript if args.transcripts else []:
                    print(f"       | {line}")
            worst = min(worst, 100 * sum(v.ok for v in verdicts) / max(1, len(verdicts)))
    finally:
        stacks.stop(st)
        print(f"data and logs kept in {root}")
    return 0 if worst >= 95.0 else 1


if __name__ == "__main__":
    sys.exit(main())

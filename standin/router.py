"""The offline stand-in's routing decisions over exactly what a real model would read (the
router's candidate lines and the person's raw message), EN and DE.

What the person wants comes from the intent recogniser (standin/intents.py, by meaning);
which task a follow-up belongs to comes from the words it shares with each candidate, its
pointing words and the candidates' ages. Evaluated in tests/routing_eval.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from llm.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock, Usage
from routing.prompt import CANDIDATES, CONVERSATION, DUPLICATE_CHECK, MARK, MOVE_TOOL
from routing.text import FILLER, content_terms, detect_language
from standin.intents import MEDIA, Recognition, recognise
from standin.parts import read
from standin.recall import asks_about_conversation
from standin.replies import kind_word, say
from standin.requested import requested

_TASK_ID = re.compile(r"\btsk_[0-9a-z]+\b")
_AGE = re.compile(r"active (\d+)([mhd]) ago")
_UNIT = {"m": 60, "h": 3600, "d": 86400}
_DEICTIC = re.compile(
    r"\b(that|this|it|them|those|the one|the ones|das|dies|es|die von|den von|das von|"
    r"davon|dieses|diese)\b",
    re.I,
)
_MEDIA_TERMS = {"video", "image"}


@dataclass
class _Cand:
    task_id: str
    kind: str
    status: str
    age_s: int
    terms: list[str]
    mine: list[str] | None = None  # duplicate check: words only in the message
    theirs: list[str] | None = None  # duplicate check: words only in the task


def _parse(line: str) -> _Cand | None:
    parts = [p.strip() for p in line[2:].split(" | ")]
    if len(parts) < 4 or not parts[0].startswith("tsk_"):
        return None
    kind, _, status = parts[1].partition(" ")
    m = _AGE.search(parts[2])
    age_s = int(m.group(1)) * _UNIT[m.group(2)] if m else 0
    fields = {p.split(":", 1)[0]: p.split(":", 1)[1].strip() for p in parts[3:] if ":" in p}
    text = " ".join(fields.get(k, "") for k in ("goal", "summary", "objects"))
    text = re.sub(r"\bobj_[0-9a-z]+\b", " ", text)
    cand = _Cand(parts[0], kind, status, age_s, content_terms(text))
    if "only in message" in fields:
        cand.mine = [w for w in fields["only in message"].split(", ") if w and w != "-"]
        cand.theirs = [w for w in fields.get("only in task", "").split(", ") if w and w != "-"]
    return cand


_SAID = re.compile(r"^- (person|lomo)(?: \(task (tsk_[0-9a-z]+)\))?: (.*)$")
_MADE = re.compile(r"^- made \S+ ago: (\S+) “(.*)” \((?:task (tsk_[0-9a-z]+)|no task)\)$")


@dataclass
class _Talk:
    """The recent conversation as the router's block shows it."""

    said: list[tuple[str, str, str | None]]  # who, text, task id; oldest first
    made: list[tuple[str, str, str | None]]  # type, name, task id; newest first

    def latest_task(self) -> str | None:
        """The task the conversation was last about: the latest message or reply that went
        to a task, else the task of the latest work."""
        for _, _, task in reversed(self.said):
            if task:
                return task
        return next((task for _, _, task in self.made if task), None)


def _talk(block: str) -> _Talk:
    talk = _Talk([], [])
    for line in block.splitlines():
        if m := _MADE.match(line):
            talk.made.append((m.group(1), m.group(2), m.group(3)))
        elif m := _SAID.match(line):
            talk.said.append((m.group(1), m.group(3), m.group(2)))
    return talk


def _read(request: ModelRequest) -> tuple[str, list[_Cand], bool, _Talk]:
    last = request.messages[-1] if request.messages else None
    texts = [b.text for b in (last.content if last else []) if isinstance(b, TextBlock)]
    person = " ".join(t for t in texts if not t.startswith(MARK))
    duplicate_check = any(t.startswith(f"{MARK} {DUPLICATE_CHECK}") for t in texts)
    listed = (f"{MARK} {CANDIDATES}", f"{MARK} {DUPLICATE_CHECK}")
    cands = [
        c
        for t in texts
        if t.startswith(listed)
        for line in t.splitlines()
        if line.startswith("- ") and (c := _parse(line)) is not None
    ]
    talk = next((_talk(t) for t in texts if t.startswith(f"{MARK} {CONVERSATION}")), None)
    return person, cands, duplicate_check, talk or _Talk([], [])


def _respond(request: ModelRequest, payload: dict[str, object]) -> ModelResponse:
    size = sum(len(s.text) for s in request.system) + sum(
        len(b.text) for m in request.messages for b in m.content if isinstance(b, TextBlock)
    )
    return ModelResponse(
        content=[_call(request, payload)],
        stop_reason="tool_use",
        usage=Usage(input_tokens=size // 4, output_tokens=20),
        model="lomo-offline",
    )


def _call(request: ModelRequest, payload: dict[str, object]) -> ToolUseBlock:
    """A move is the router's `move_message` tool; everything else its `route`."""
    if payload.get("decision") == "move":
        args = {k: v for k, v in payload.items() if k != "decision"}
        return ToolUseBlock(id=f"toolu_{request.purpose}", name=MOVE_TOOL.name, input=args)
    return ToolUseBlock(id=f"toolu_{request.purpose}", name="route", input=payload)


def _decide_duplicate(cands: list[_Cand]) -> dict[str, object]:
    same = [c for c in cands if c.mine is not None and not c.mine]
    if len(same) == 1:
        return {"decision": "existing", "task_id": same[0].task_id, "reason": "same goal"}
    if len(same) > 1:
        return {"decision": "clarify", "candidate_ids": [c.task_id for c in same]}
    adds = [c for c in cands if c.mine and not c.theirs]
    if len(adds) == 1:
        return {"decision": "existing", "task_id": adds[0].task_id, "reason": "adds detail"}
    if len(adds) > 1:
        return {"decision": "clarify", "candidate_ids": [c.task_id for c in adds]}
    return {"decision": "new", "reason": "the differing words name another goal"}


# The recogniser reads the message alone; with earlier work it names, a message that reads
# partly as a change ("poster B but with a blue sky") is one, and one that reads partly as
# multi-part work ("a row of illustrations for a book") is planned as such.
CHANGE_WITH_CONTEXT = 0.25
MULTIPART_TOO = 0.35


_NOT_WORK = ("question", "remember", "forget", "move", "change")
# Words that ask for something to be made, whatever else the sentence states.
_ASKING = re.compile(
    r"\b(?:please|can you|could you|make|create|draw|paint|design|generate|produce|render|"
    r"give me|i need|we need|i'd like|we'd like|i want|we want|"
    r"bitte|mach|mache|erstelle|erstell|mal|male|zeichne|gestalte|entwirf|produziere|"
    r"brauche|bräuchte|brauchen|bräuchten|hätte gern|hätten gern|möchte|möchten|"
    r"kannst du|könntest du)\b",
    re.I,
)


def asked_for(text: str) -> bool:
    """Pieces named as work to make: with a length or a format, or in words that ask for
    them, and not put as a question. The recogniser can read such a request as a stated
    fact ("Zwei zehnsekündige Werbeclips für die Eröffnung …")."""
    named = read(text).parts
    if not named or requested(text).asks:
        return False
    return any(p.duration_s or p.formats for p in named) or bool(_ASKING.search(text))


def multipart_work(text: str, rec: Recognition) -> bool:
    """Multi-part work: recognised as such, or partly so, or naming several pieces ("four
    posters", a numbered storyboard) whatever medium it reads as."""
    named = read(text)
    pieces = sum(p.count or (2 if p.plural else 1) for p in named.parts)
    several = max(pieces, requested(text).count or 0) > 1 or len(named.parts) > 1
    unmakeable = bool(named.unsupported) and rec.intent not in _NOT_WORK
    # Work by its words even where its meaning is unsure, unless it is put as a question.
    # A request that counts its pieces and reads partly as media is work even where the
    # meaning leans to a stated fact ("three reels … and one music track").
    asks = requested(text).asks
    counted = any(p.count for p in named.parts)
    leans = sum(rec.scores[m] for m in (*MEDIA, "multipart")) > rec.scores["remember"]
    work = (
        rec.intent in (*MEDIA, "multipart")
        or (rec.intent in ("other", None) and not asks)
        or (rec.intent == "remember" and not asks and counted and (leans or asked_for(text)))
    )
    return (
        rec.intent == "multipart"
        or rec.scores["multipart"] >= MULTIPART_TOO
        or ((several and work) or unmakeable)
    )


def _decide(
    text: str, cands: list[_Cand], rec: Recognition | None, recent: str | None = None
) -> dict[str, object]:
    """`recent`: the task the conversation was last about; a follow-up that names no work
    continues it."""
    intent = rec.intent if rec else None
    if m := _TASK_ID.search(text):
        return {"decision": "existing", "task_id": m.group(0), "reason": "task named"}
    if intent == "forget":
        # Forgetting is irreversible: a small task of its own asks on a forget card.
        return {"decision": "lightweight", "reason": "a request to forget"}
    terms = [t for t in content_terms(text) if t not in FILLER]
    deictic = bool(_DEICTIC.search(text))
    overlap = {c.task_id: len(set(terms) & set(c.terms) - _MEDIA_TERMS) for c in cands}
    best = max(overlap.values(), default=0)
    ties = [c for c in cands if best and overlap[c.task_id] == best]
    if intent == "move":
        # "That was meant for the posters": the task it names, by the words it shares.
        if len(ties) == 1:
            return {"decision": "move", "task_id": ties[0].task_id, "reason": "task named"}
        return {"decision": "answer", "reason": "move: which task is unclear"}
    change = rec.scores["change"] if rec else 0.0
    followup = intent == "change" or (best >= 1 and change >= CHANGE_WITH_CONTEXT)
    multipart = rec is not None and multipart_work(text, rec)
    named = best >= 2 and (deictic or intent is None)
    asked = intent in ("remember", "other", None) and asked_for(text)
    if intent in ("question", "remember", "other", None) and not (named or multipart or asked):
        return {"decision": "answer", "reason": f"main answers ({intent or 'unsure'})"}
    if (intent == "multipart" or multipart) and not followup and not (deictic and best):
        return {"decision": "new", "briefing": text, "reason": "a goal with several steps"}
    if intent == "video" and not any(c.kind == "video" or "video" in c.terms for c in ties):
        # Turning an earlier image into a video is new work with a reference.
        return {"decision": "lightweight", "reason": "a new generation"}
    if ties and (followup or deictic or best >= 2):
        if recent in {c.task_id for c in ties}:
            return {"decision": "existing", "task_id": recent, "reason": "the conversation's"}
        if len(ties) == 1:
            return {"decision": "existing", "task_id": ties[0].task_id, "reason": "matches"}
        return {"decision": "clarify", "candidate_ids": [c.task_id for c in ties]}
    if followup and recent in {c.task_id for c in cands} and not best:
        return {"decision": "existing", "task_id": recent, "reason": "the conversation's"}
    if followup and cands:
        by_age = sorted(cands, key=lambda c: c.age_s)
        first = by_age[0]
        second = by_age[1] if len(by_age) > 1 else None
        if second is None or second.age_s > max(3600, 6 * first.age_s):
            return {"decision": "existing", "task_id": first.task_id, "reason": "the latest"}
        return {"decision": "clarify", "candidate_ids": [first.task_id, second.task_id]}
    if intent in MEDIA or asked:
        return {"decision": "lightweight", "reason": "one generation"}
    return {"decision": "answer", "reason": "nothing earlier to change"}


def route(request: ModelRequest) -> ModelResponse:
    text, cands, duplicate_check, talk = _read(request)
    lang = detect_language(text)
    if duplicate_check:
        payload = _decide_duplicate(cands)
    else:
        rec = recognise(text) if text.strip() else None
        payload = _decide(text, cands, rec, talk.latest_task())
        if payload["decision"] == "answer":
            intent = rec.intent if rec else None
            if intent in ("question", None) and text.strip() and asks_about_conversation(text):
                payload["answer"] = conversation_answer(talk, lang)
            else:
                payload["answer"] = main_answer(text, request, lang, intent)
    payload["language"] = lang
    return _respond(request, payload)


def conversation_answer(talk: _Talk, lang: str) -> str:
    """A question about the conversation, answered from what exists: the work by kind and
    name, newest first (never an id); else what was asked for and is not finished yet."""
    de = lang == "de"
    if talk.made:
        counts = Counter((kind, name) for kind, name, _ in talk.made)  # newest first
        names = [_pieces(n, kind, name, lang) for (kind, name), n in counts.items()]
        head = "Zuletzt habe ich gemacht: " if de else "Lately I made "
        return head + ", ".join(names) + "."
    asked = [text for who, text, _ in talk.said if who == "person"]
    if asked:
        if de:
            return f"Noch ist nichts fertig. Zuletzt hast du gefragt: {_quoted(asked[-1], de)}."
        return f"Nothing is finished yet. The latest you asked for: {_quoted(asked[-1], de)}."
    return say("nothing_yet", lang)


_PLURAL_DE = {"Bild": "Bilder", "3D-Modell": "3D-Modelle", "Video": "Videos", "Audio": "Audios"}


def _pieces(n: int, kind: str, name: str, lang: str) -> str:
    word, de = kind_word(kind, lang), lang == "de"
    if n == 1:
        return f"{'das' if de else 'the'} {word} {_quoted(name, de)}"
    if de:
        return f"{n} {_PLURAL_DE.get(word, word)} für {_quoted(name, de)}"
    return f"{n} {word}s for {_quoted(name, de)}"


def _quoted(text: str, de: bool) -> str:
    text = _TASK_ID.sub("", text).strip()
    return f"„{text}“" if de else f"“{text}”"


def main_answer(text: str, request: ModelRequest, lang: str, intent: str | None) -> str:
    """Main's own reply when no task takes the message."""
    if intent == "question":
        return capability_answer(text, request, lang)
    keys = {
        "remember": "remember",
        "other": "other",
        "change": "nothing_to_change",
        "move": "move_which",
    }
    return say(keys.get(intent or "", "unsure"), lang)


def capability_answer(text: str, request: ModelRequest, lang: str) -> str:
    catalogue = [
        line[2:] for s in request.system for line in s.text.splitlines() if line.startswith("- ")
    ]
    kinds = [
        k
        for k in ("video", "image", "audio", "3d")
        if k in text.lower() or (k == "image" and "bild" in text.lower())
    ]
    rows = [c for c in catalogue if any(f"({k}," in c for k in kinds)] or catalogue
    head = "Das kann der Katalog:" if lang == "de" else "From the model catalogue:"
    return head + "\n" + "\n".join(rows)

"""Deterministic memory extraction for the offline stand-in model (`purpose == "extract"`).

A handful of English and German rules, enough to drive the memory service end to end
without a model key: brand facts (profile, stated), refinements of an existing memory,
one-off instructions for the current work (task scope), usual preferences, and explicit
"remember ..." requests. It answers with the same `record_memories` tool call a real
model would make, reading only the request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llm.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock, Usage
from memory.candidates import EXTRACT_TOOL

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_EXPLICIT = re.compile(r"^\s*(?:please\s+)?(?:remember|note|merk dir|bitte merken)\b[:,]?\s*", re.I)
_BRAND_EN = re.compile(
    r"\b(?:our|my)\s+(brand|company|logo|studio)(?:'s|’s)?\s+(main\s+)?"
    r"(colou?r|font|typeface|tone)\s+is\s+(now\s+)?(?P<value>[^.!?,;]+)",
    re.I,
)
_BRAND_DE = re.compile(
    r"\b(haupt)?(farbe|schrift)\s+unserer\s+(marke|firma)\s+ist\s+(jetzt\s+)?(?P<value>[^.!?,;]+)",
    re.I,
)
_REFINE_EN = re.compile(
    r"\b(?P<base>\w+)\s+(?:with|and|combined with)\s+(?P<extra>[\w\s-]+?)\s+"
    r"(?:feels|looks|seems)\s+(?P<effect>[^.!?,;]+)",
    re.I,
)
_REFINE_DE = re.compile(
    r"\b(?P<base>\w+)\s+mit\s+(?P<extra>[\w\s-]+?)\s+(?:kombiniert\s+)?(?:wirkt|sieht)\s+"
    r"(?P<effect>[^.!?,;]+)",
    re.I,
)
_TEMP = re.compile(r"\b(this time|diesmal)\b", re.I)
_TEMP_FILLER = re.compile(
    r"\b(this time|diesmal|let's|let us|try|use|go with|probieren wir|nehmen wir|versuchen wir|"
    r"bitte)\b[,:]?",
    re.I,
)
_USUAL_EN = re.compile(
    r"\bI\s+(?:usually|generally|always|normally)\s+(?:like|prefer|love)\s+(?P<value>[^.!?;]+)",
    re.I,
)
_USUAL_DE = re.compile(
    r"\bich\s+mag\s+(?:normalerweise|meistens|immer|generell)\s+(?P<value>[^.!?;]+)", re.I
)
_COLOUR = re.compile(
    r"\b(red|blue|green|yellow|white|black|orange|purple|pink|colou?r|rot|blau|grün|gelb|"
    r"weiß|schwarz|farbe)\w*",
    re.I,
)
_EXISTING = re.compile(
    r"^- \[(?P<id>[^\]]+)\] subject=(?P<subject>\S+) attribute=(?P<attribute>\S+) "
    r"value=(?P<value>.*?) kind=\S+ scope=\S+: ",
    re.M,
)
_SUBJECTS = {"marke": "brand", "firma": "company"}


@dataclass
class _Existing:
    subject: str
    attribute: str
    value: str


def _german(text: str) -> bool:
    return bool(re.search(r"[äöüß]|\b(unserer|wirkt|diesmal|ich|mit|ist)\b", text, re.I))


def _existing(request: ModelRequest) -> list[_Existing]:
    out: list[_Existing] = []
    for block in request.system:
        for m in _EXISTING.finditer(block.text):
            out.append(_Existing(m["subject"], m["attribute"], m["value"]))
    return out


def _cand(**kw: object) -> dict[str, object]:
    return {"kind": "stated", "operation": "new", "explicit": False, **kw}


def _sentence_candidates(
    sentence: str, existing: list[_Existing], explicit: bool
) -> list[dict[str, object]]:
    """At most one candidate per sentence: the first rule that matches it decides."""
    quote = sentence.strip()
    de = _german(quote)
    candidate = (
        _brand_en(quote, explicit)
        or _brand_de(quote, explicit)
        or _this_time(quote, de)
        or _refinement(quote, de, existing, explicit)
        or _usual(quote, de, explicit)
    )
    return [candidate] if candidate else []


def _brand_en(quote: str, explicit: bool) -> dict[str, object] | None:
    """A brand fact ("our brand's main colour is (now) X"); "now" makes it a change."""
    if not (m := _BRAND_EN.search(quote)):
        return None
    attr = ("main_" if m.group(2) else "") + m.group(3).lower().replace("color", "colour")
    subject, value = m.group(1).lower(), m["value"].strip()
    noun = attr.replace("_", " ")
    return _cand(
        content=f"The {subject}'s {noun} is {value}.",
        scope="profile",
        subject=subject,
        attribute=attr,
        value=value,
        operation="change" if m.group(4) else "new",
        quote=quote,
        explicit=explicit,
    )


def _brand_de(quote: str, explicit: bool) -> dict[str, object] | None:
    """A brand fact in German ("die (Haupt)farbe unserer Marke ist (jetzt) X")."""
    if not (m := _BRAND_DE.search(quote)):
        return None
    attr = ("main_" if m.group(1) else "") + ("colour" if m.group(2).lower() == "farbe" else "font")
    subject, value = _SUBJECTS.get(m.group(3).lower(), "brand"), m["value"].strip()
    label = "Hauptfarbe" if attr == "main_colour" else m.group(2)
    return _cand(
        content=f"Die {label} der Marke ist {value}.",
        scope="profile",
        subject=subject,
        attribute=attr,
        value=value,
        operation="change" if m.group(4) else "new",
        quote=quote,
        explicit=explicit,
    )


def _this_time(quote: str, de: bool) -> dict[str, object] | None:
    """An instruction for the current task only ("this time, X"), never a profile fact."""
    if not _TEMP.search(quote):
        return None
    value = " ".join(_TEMP_FILLER.sub(" ", quote).split()).strip(" .!,")
    attribute = "colour" if _COLOUR.search(quote) else "instruction"
    content = f"Für diese Aufgabe: {value}." if de else f"For this task: {value}."
    return _cand(
        content=content,
        scope="task",
        subject="current_work",
        attribute=attribute,
        value=value,
        quote=quote,
    )


def _refinement(
    quote: str, de: bool, existing: list[_Existing], explicit: bool
) -> dict[str, object] | None:
    """A refinement ("X with Y feels Z") of the existing memory whose value names X, if any."""
    if not (m := (_REFINE_DE.search(quote) if de else _REFINE_EN.search(quote))):
        return None
    base, extra, effect = m["base"], m["extra"].strip(), m["effect"].strip()
    target = next((e for e in existing if base.lower() in e.value.lower().split()), None)
    value = f"{base} with {extra}" if not de else f"{base} mit {extra}"
    if de:
        content = (
            f"Die Marke bevorzugt {base} kombiniert mit {extra}; der Gesamteindruck wirkt {effect}."
        )
    else:
        content = f"The brand prefers {base.lower()} combined with {extra}; it feels {effect}."
    return _cand(
        content=content,
        scope="profile",
        subject=target.subject if target else "brand",
        attribute=target.attribute if target else "palette",
        value=value,
        operation="refine" if target else "new",
        quote=quote,
        explicit=explicit,
    )


def _usual(quote: str, de: bool, explicit: bool) -> dict[str, object] | None:
    """A standing preference of the person ("I usually like X")."""
    if not (m := (_USUAL_DE.search(quote) or _USUAL_EN.search(quote))):
        return None
    value = m["value"].strip()
    content = f"Mag normalerweise {value}." if de else f"Usually likes {value}."
    return _cand(
        content=content,
        scope="profile",
        subject="person",
        attribute="preference",
        value=value,
        quote=quote,
        explicit=explicit,
    )


_FORGET_REQUEST = re.compile(r"^\s*(?:please\s+|bitte\s+)?(?:forget|vergiss)\b", re.I)


def offline_extract(request: ModelRequest) -> ModelResponse:
    text = " ".join(
        b.text
        for m in request.messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, TextBlock)
    )
    existing = _existing(request)
    candidates: list[dict[str, object]] = []
    for sentence in _SENTENCE.findall(text):
        if _FORGET_REQUEST.match(sentence):
            continue  # "forget that X" asks to drop X; it never states X
        explicit = bool(_EXPLICIT.search(sentence))
        body = _EXPLICIT.sub("", sentence) if explicit else sentence
        body = re.sub(r"^\s*(?:that|dass)\s+", "", body, flags=re.I)
        candidates.extend(_sentence_candidates(body, existing, explicit))
    return ModelResponse(
        content=[
            ToolUseBlock(
                id="toolu_extract_0001", name=EXTRACT_TOOL, input={"candidates": candidates}
            )
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=max(1, len(text) // 4), output_tokens=20 * len(candidates) + 5),
        model="lomo-offline",
    )

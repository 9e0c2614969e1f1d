"""Sentences for people live in the words catalogue (lomo/words), never inline in the
worker's code: a string in activities/ or workflows/ that reads like a sentence fails here.

Not sentences for people, and so skipped: docstrings, log messages, exception messages
(anything under `raise` or passed to an error class) and assert messages.
"""

from __future__ import annotations

import ast
import re

from tests.source_scan import sources

PACKAGES = ("activities", "workflows")

_WORD = re.compile(r"[A-Za-zÄÖÜäöüß]{2,}")
# Short words a sentence in English or German almost always has and an identifier,
# a key or a format string almost never does.
_FUNCTION_WORDS = frozenset(
    "the a an is are was be to of in on and or for with your you this that it not no "
    "here there what which please could would will can "
    "der die das ist sind war ein eine einen und oder für mit dein deine du sie "
    "ich nicht kein keine hier bitte konnte wurde wird kann zu von im auf".split()
)
_LOGGERS = frozenset({"log", "logger", "logging"})
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _text(node: ast.AST) -> str | None:
    """The text of a string constant, or of an f-string with `{}` for its values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) else "{}"
            for v in node.values
            if isinstance(v, ast.Constant | ast.FormattedValue)
        )
    return None


def looks_like_a_sentence(text: str) -> bool:
    """Two or more words that end like a sentence (`.`, `?`, `!`, `:`), or start with a
    capital and hold a function word: "Here is your image." and "Please confirm: " are;
    "task.reply", "waiting_generation" and "image/png" are not."""
    words = _WORD.findall(text)
    if len(words) < 2 or " " not in text.strip():
        return False
    end = text.strip().rstrip("\"'”“„»)]")
    if end.endswith((".", "?", "!", ":")):
        return True
    lowered = {w.lower() for w in words}
    return text.lstrip()[:1].isupper() and bool(lowered & _FUNCTION_WORDS)


def _called(node: ast.Call) -> tuple[str, str]:
    """(the object, the name) of a call: ('log', 'warning'), ('', 'ApplicationError')."""
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value
        base = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        return base, func.attr
    return "", getattr(func, "id", "")


def _not_for_people(tree: ast.AST) -> set[int]:
    """ids of the nodes whose strings are for developers and operators, not people."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and _text(first.value) is not None:
                roots.append(first)  # a docstring
        if isinstance(node, ast.Raise | ast.Assert):
            roots.append(node)
        if isinstance(node, ast.Call):
            owner, name = _called(node)
            if owner in _LOGGERS or name.endswith(("Error", "Exception")):
                roots.append(node)
    return {id(n) for root in roots for n in ast.walk(root)}


def inline_sentences(source: str, name: str = "<source>") -> list[str]:
    """`file:line: text` of each string in `source` that reads like a sentence for a person."""
    tree = ast.parse(source, name)
    skip = _not_for_people(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)  # the f-string is judged as a whole
    for node in ast.walk(tree):
        text = _text(node)
        if text is not None and id(node) not in skip and looks_like_a_sentence(text):
            found.append(f"{name}:{node.lineno}: {text[:60]!r}")
    return found


def test_the_detector_finds_a_sentence_and_passes_what_is_not_for_people() -> None:
    source = '''
"""A module docstring. It reads like a sentence and is skipped."""
import logging
log = logging.getLogger(__name__)

def reply(name: str, de: bool) -> str:
    """Docstrings are for developers."""
    log.warning("task %s: the reply could not be stored.", name)
    if not name:
        raise ValueError("no name was given for this reply.")
    key = "task.reply"
    kind = "waiting_generation"
    return f"Hier ist dein Bild „{name}“." if de else f"Here is your image “{name}”."

TITLE = "Confirm the price"
LABEL = "Please confirm: "
'''
    found = inline_sentences(source)
    assert sorted(int(f.split(":")[1]) for f in found) == [13, 13, 15, 16], found


def test_no_sentence_for_people_is_written_inline() -> None:
    found = [hit for name, text in sources(*PACKAGES) for hit in inline_sentences(text, name)]
    assert not found, "sentences outside lomo/words:\n" + "\n".join(found)

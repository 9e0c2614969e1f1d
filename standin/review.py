"""The offline model looks at a result before presenting it, as a model with vision would:
it reads the pictures in its context (the result, and the picture it revised when the
context shows one), measures them, and checks the brief's words against them."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from llm.types import ImageBlock, Message, TextBlock, ToolUseBlock
from workspace.errors import NotAPicture
from workspace.picture import PictureProps, Verdict, matches, read
from workspace.preview import BEFORE_LABEL, RESULT_LABEL


@dataclass(frozen=True)
class Review:
    verdict: Verdict
    call: ToolUseBlock  # the generation that made the result
    remakes_left: int


def review(messages: list[Message]) -> Review | None:
    """The last generation's result checked against its prompt; None when the context
    shows no picture of it (not an image, or over the context's bound)."""
    call = _last_generation(messages)
    if call is None or not messages:
        return None
    pictures = _labelled(messages[-1])
    after = pictures.get(RESULT_LABEL)
    if after is None:
        return None
    verdict = matches(str(call.input.get("prompt", "")), after, pictures.get(BEFORE_LABEL))
    return Review(verdict, call, 1 - _this_turns_remakes(messages, call.name))


def _labelled(message: Message) -> dict[str, PictureProps]:
    """The pictures of a message by the runtime label before each (the latest wins)."""
    out: dict[str, PictureProps] = {}
    label = ""
    for b in message.content:
        if isinstance(b, TextBlock) and b.text.startswith("[runtime]"):
            label = next((x for x in (RESULT_LABEL, BEFORE_LABEL) if b.text.startswith(x)), "")
        elif isinstance(b, ImageBlock) and label:
            try:
                out[label] = read(base64.b64decode(b.data))
            except (binascii.Error, NotAPicture):
                continue
    return out


def _last_generation(messages: list[Message]) -> ToolUseBlock | None:
    for m in reversed(messages):
        for b in reversed(m.content):
            if isinstance(b, ToolUseBlock) and b.name.startswith("generate_"):
                return b
    return None


def _this_turns_remakes(messages: list[Message], name: str) -> int:
    """Calls of the same generation since the person last wrote, beyond the first."""
    calls = 0
    for m in reversed(messages):
        if m.role == "user" and any(
            isinstance(b, TextBlock) and not b.text.startswith("[runtime]") for b in m.content
        ):
            break
        calls += sum(isinstance(b, ToolUseBlock) and b.name == name for b in m.content)
    return max(0, calls - 1)

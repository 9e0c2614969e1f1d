"""Provider-neutral request and response types (a subset of Anthropic's Messages API shape).

Everything here is a plain dataclass that serializes to JSON, so requests and responses can
be stored in the DB (model_steps) and replayed without the SDK.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant"]
StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"]


@dataclass
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass
class ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"


@dataclass
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"
    # Deferred tools this result makes visible (`tool_reference` blocks on the wire; the API
    # expands each into the tool's definition at this place in the conversation).
    tool_refs: list[str] = field(default_factory=list)


@dataclass
class ImageBlock:
    """A picture shown to the model, as base64 bytes. `ref` says which work it is (object,
    version, size); it stays on this side and is never sent."""

    media_type: str
    data: str
    ref: dict[str, Any] = field(default_factory=dict)
    type: Literal["image"] = "image"

    def label(self) -> str:
        r = self.ref
        size = f" {r['width']}x{r['height']}" if "width" in r else ""
        return f"[image {r.get('object_id', '?')} v{r.get('version', '?')}{size}]"


Block = TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock


@dataclass
class Message:
    role: Role
    content: list[Block]


@dataclass
class SystemBlock:
    """One block of the system prompt; `cache=True` puts a cache breakpoint after it."""

    text: str
    cache: bool = False


@dataclass
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    cache: bool = False  # a cache breakpoint after this tool
    # Sent with `defer_loading`: not part of the prompt until a tool_reference loads it.
    deferred: bool = False


@dataclass
class ModelRequest:
    system: list[SystemBlock]
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 2048
    # What the call is for ("task_step", "route", "extract_memory"); providers may log it.
    purpose: str = "task_step"
    # [message index, block index] pairs: a cache breakpoint after each such block (the end
    # of the summaries, the end of the history the next step repeats byte for byte).
    cache_points: list[list[int]] = field(default_factory=list)


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass
class ModelResponse:
    content: list[TextBlock | ToolUseBlock]
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelResponse:
        blocks: list[TextBlock | ToolUseBlock] = []
        for b in data["content"]:
            if b["type"] == "text":
                blocks.append(TextBlock(text=b["text"]))
            else:
                blocks.append(ToolUseBlock(id=b["id"], name=b["name"], input=b["input"]))
        return cls(
            content=blocks,
            stop_reason=data["stop_reason"],
            usage=Usage(**data.get("usage", {})),
            model=data.get("model", ""),
        )


def block_from_dict(b: dict[str, Any]) -> Block:
    if b["type"] == "text":
        return TextBlock(text=b["text"])
    if b["type"] == "tool_use":
        return ToolUseBlock(id=b["id"], name=b["name"], input=b["input"])
    if b["type"] == "image":
        return ImageBlock(media_type=b["media_type"], data=b["data"], ref=dict(b.get("ref", {})))
    return ToolResultBlock(
        tool_use_id=b["tool_use_id"],
        content=b["content"],
        is_error=b.get("is_error", False),
        tool_refs=list(b.get("tool_refs", [])),
    )


def request_to_dict(req: ModelRequest) -> dict[str, Any]:
    return asdict(req)


def request_from_dict(data: dict[str, Any]) -> ModelRequest:
    return ModelRequest(
        system=[SystemBlock(**s) for s in data["system"]],
        messages=[
            Message(role=m["role"], content=[block_from_dict(b) for b in m["content"]])
            for m in data["messages"]
        ],
        tools=[ToolSpec(**t) for t in data.get("tools", [])],
        max_tokens=data.get("max_tokens", 2048),
        purpose=data.get("purpose", "task_step"),
        cache_points=data.get("cache_points", []),
    )


class ModelProvider(Protocol):
    """Anything that turns a request into a response. Raises lomo.errors.ModelError."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

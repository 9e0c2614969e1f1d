"""Streaming a step's text to the person while the model writes it.

A provider that can stream implements `Streams`; `complete_streaming` uses it and falls
back to a whole answer for one that cannot. `Paced` streams a provider that answers whole
(the offline model) in pieces at a reading pace, so the person sees the same kind of
arrival as with a real model.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol, runtime_checkable

from llm.types import ModelProvider, ModelRequest, ModelResponse

# Receives each new piece of the response's text, in order.
TextSink = Callable[[str], Awaitable[None]]


@runtime_checkable
class Streams(Protocol):
    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse: ...


async def complete_streaming(
    provider: ModelProvider, request: ModelRequest, on_text: TextSink
) -> ModelResponse:
    if isinstance(provider, Streams):
        return await provider.stream(request, on_text)
    return await provider.complete(request)


def pieces(text: str, words: int = 2) -> Iterator[str]:
    """The text in runs of a few words, each with its following whitespace."""
    tokens = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    for i in range(0, len(tokens), words):
        yield "".join(tokens[i : i + words])


class Paced:
    """A provider that answers whole, its text streamed at `chars_per_second`."""

    def __init__(self, inner: ModelProvider, chars_per_second: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.chars_per_second = chars_per_second

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        response = await self.inner.complete(request)
        for piece in pieces(response.text):
            await on_text(piece)
            await asyncio.sleep(len(piece) / self.chars_per_second)
        return response

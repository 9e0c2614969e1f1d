"""A provider for tests: answers from a script, records what it was asked."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable

from llm.types import ModelRequest, ModelResponse
from lomo.errors import ModelError

ScriptStep = (
    ModelResponse
    | BaseException
    | Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
)


class ScriptedProvider:
    """Returns the scripted responses in order; each step may be a ModelResponse, a callable
    taking the request (sync or async), or an exception instance to raise. Raises ModelError
    once the script is exhausted."""

    name = "scripted"

    def __init__(
        self,
        script: Iterable[ScriptStep],
        unscripted: tuple[str, ...] = ("extract", "summarize", "summarize_episode"),
    ) -> None:
        self._script: list[ScriptStep] = list(script)
        self._next = 0
        self.requests: list[ModelRequest] = []
        # Background calls (memory extraction beside every message, segment summaries) are
        # answered by the offline stand-in, so they neither consume nor reorder the script.
        self.unscripted = unscripted
        self.background: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        return len(self._script) - self._next

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.purpose in self.unscripted:
            from standin.model import OfflineModel

            self.background.append(request)
            return await OfflineModel().complete(request)
        self.requests.append(request)
        if self._next >= len(self._script):
            raise ModelError(
                f"scripted provider exhausted after {len(self._script)} responses",
                status_code=None,
                retryable=False,
            )
        step = self._script[self._next]
        self._next += 1
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelResponse):
            return step
        result = step(request)
        if inspect.isawaitable(result):
            return await result
        return result

"""Memory activities: extraction after a message, the forget cascade, a person's
correction (memory/writes.py). With a memory service (`memory_url`), the service runs them
and owns the vector index; without one they run here, on this worker's own index.

A refusal no retry can change is non-retryable; a memory service that is down fails the
attempt, and the MemoryWorkflow's retries and later rounds run the job once it is back.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from llm.types import ModelProvider
from memory.client import MemoryClient
from memory.services import MemoryServices, get_services
from memory.types import (
    CorrectInput,
    CorrectOutput,
    ExtractInput,
    ExtractOutput,
    ForgetInput,
    ForgetOutput,
)
from memory.writes import MemoryWrites, Refused
from tools.base import ToolDeps


class MemoryActivities:
    def __init__(
        self, deps: ToolDeps, provider: ModelProvider, services: MemoryServices | None = None
    ) -> None:
        self.deps = deps
        self.provider = provider
        self._services = services
        self._client: MemoryClient | None = None

    @property
    def services(self) -> MemoryServices:
        if self._services is None:
            self._services = get_services(self.deps.settings)
        return self._services

    def _writes(self) -> MemoryWrites | MemoryClient:
        settings = self.deps.settings
        if settings.memory_url and self._services is None:
            if self._client is None:
                self._client = MemoryClient(
                    settings.memory_url, settings.memory_call_timeout_seconds
                )
            return self._client
        return MemoryWrites(self.deps.db, settings, self.provider, self.services)

    @activity.defn(name="memory_extract")
    async def extract(self, inp: ExtractInput) -> ExtractOutput:
        try:
            return await self._writes().extract(inp)
        except Refused as e:
            raise ApplicationError(str(e), type="MemoryRefused", non_retryable=True) from e

    @activity.defn(name="memory_forget")
    async def forget(self, inp: ForgetInput) -> ForgetOutput:
        try:
            return await self._writes().forget(inp)
        except Refused as e:
            raise ApplicationError(str(e), type="MemoryRefused", non_retryable=True) from e

    @activity.defn(name="memory_correct")
    async def correct(self, inp: CorrectInput) -> CorrectOutput:
        """The person's own words replace the current version: a new, stated version."""
        try:
            return await self._writes().correct(inp)
        except Refused as e:
            raise ApplicationError(str(e), type="MemoryRefused", non_retryable=True) from e

    def all(self) -> list[Any]:
        return [self.extract, self.forget, self.correct]

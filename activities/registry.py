"""Assembles the worker: its model provider, every tool set and every activity class (one
place to extend)."""

from __future__ import annotations

from typing import Any, Protocol

import httpx
from pydantic import SecretStr

from activities.flows import FlowActivities
from activities.generation import GenerationActivities
from activities.memory import MemoryActivities
from activities.nudges import NudgeActivities
from activities.routing import RoutingActivities
from activities.runtime import RuntimeActivities
from activities.segments import SegmentActivities
from llm.streaming import Paced
from llm.types import ModelProvider
from lomo.db.engine import Database
from lomo.errors import ConfigError
from lomo.settings import Settings
from tools.base import Tool, ToolDeps
from tools.checklist import checklist_tools
from tools.context import context_tools
from tools.flows import flow_tools
from tools.generation import generation_tools
from tools.memory import memory_tools
from tools.probes import probe_tools
from tools.workspace import workspace_tools
from workspace.blobs import make_asset_store


class ProviderSettings(Protocol):
    @property
    def use_anthropic(self) -> bool: ...

    @property
    def anthropic_api_key(self) -> SecretStr | None: ...

    @property
    def anthropic_model(self) -> str: ...

    @property
    def anthropic_base_url(self) -> str | None: ...

    @property
    def anthropic_deferred_tools(self) -> bool: ...

    @property
    def offline_stream_chars_per_second(self) -> float: ...


def build_provider(settings: ProviderSettings) -> ModelProvider:
    """AnthropicProvider when settings ask for Anthropic, else the offline stand-in model."""
    if settings.use_anthropic:
        key = settings.anthropic_api_key
        if key is None or not key.get_secret_value().strip():
            raise ConfigError("model provider is anthropic but ANTHROPIC_API_KEY is not set")
        from llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(
            api_key=key.get_secret_value(),
            model=settings.anthropic_model,
            base_url=settings.anthropic_base_url,
            deferred_tools=settings.anthropic_deferred_tools,
        )
    from standin.model import OfflineModel

    pace = settings.offline_stream_chars_per_second
    return Paced(OfflineModel(), pace) if pace > 0 else OfflineModel()


def build_tools(deps: ToolDeps) -> dict[str, Tool]:
    tools = [
        *checklist_tools(deps),
        *probe_tools(deps),
        *generation_tools(deps),
        *workspace_tools(deps),
        *memory_tools(deps),
        *flow_tools(deps),
    ]
    by_name = {t.name: t for t in tools}
    # Last among the core tools: the prefix's cache breakpoint follows read_output.
    return by_name | {t.name: t for t in context_tools(deps, by_name)}


def build_activities(
    settings: Settings,
    db: Database,
    http: httpx.AsyncClient,
    provider: ModelProvider | None = None,
    extra_tools: list[Tool] | None = None,
) -> list[Any]:
    """`extra_tools`: stubs a bench or test adds beside the real tool sets."""
    provider = provider or build_provider(settings)
    deps = ToolDeps(db=db, http=http, assets=make_asset_store(settings), settings=settings)
    tools = build_tools(deps) | {t.name: t for t in extra_tools or []}
    return [
        *RuntimeActivities(deps, provider, tools).all(),
        *SegmentActivities(deps, provider).all(),
        *GenerationActivities(deps).all(),
        *FlowActivities(deps).all(),
        *RoutingActivities(db, provider, settings).all(),
        *MemoryActivities(deps, provider).all(),
        *NudgeActivities(db, settings).all(),
    ]

"""Assembles every tool set and every activity class of the worker (one place to extend)."""

from __future__ import annotations

from typing import Any

import httpx

from activities.flows import FlowActivities
from activities.generation import GenerationActivities
from activities.memory import MemoryActivities
from activities.routing import RoutingActivities
from activities.runtime import RuntimeActivities
from activities.segments import SegmentActivities
from llm.providers import build_provider
from llm.types import ModelProvider
from lomo.db.engine import Database
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
    ]

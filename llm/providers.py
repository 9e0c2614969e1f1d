"""Choosing the model provider from settings."""

from __future__ import annotations

from typing import Protocol

from pydantic import SecretStr

from llm.types import ModelProvider
from lomo.errors import ConfigError


class ProviderSettings(Protocol):
    @property
    def use_anthropic(self) -> bool: ...

    @property
    def anthropic_api_key(self) -> SecretStr | None: ...

    @property
    def anthropic_model(self) -> str: ...

    @property
    def anthropic_base_url(self) -> str | None: ...


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
        )
    from llm.standin.model import OfflineModel

    return OfflineModel()

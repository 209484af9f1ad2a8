"""Model backends behind one Provider protocol: anthropic (Claude), scripted (canned turns), mock (dry run)."""

from __future__ import annotations

from lev_nb.providers.anthropic import AnthropicProvider
from lev_nb.providers.base import ERROR_KINDS, Provider, ProviderError
from lev_nb.providers.mock import MockModel
from lev_nb.providers.resolve import (
    ModelOverride,
    provider_for,
    register_provider,
    resolve_model,
)
from lev_nb.providers.scripted import ScriptedModel, ScriptFileError

__all__ = [
    "ERROR_KINDS",
    "AnthropicProvider",
    "MockModel",
    "ModelOverride",
    "Provider",
    "ProviderError",
    "ScriptFileError",
    "ScriptedModel",
    "provider_for",
    "register_provider",
    "resolve_model",
]

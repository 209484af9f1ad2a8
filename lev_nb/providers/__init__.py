"""Model backends behind one Provider protocol: anthropic (Claude), openai (OpenAI, OpenRouter,
Ollama and any OpenAI-compatible server), scripted (canned turns), mock (dry run), Rhai provider
scripts, and any object with ``name`` and ``complete`` (see :class:`Provider`).

A provider of your own is registered by name with :func:`register_provider`; a stage then names it
as ``provider = "<name>"``. What a request carries and what a response must hold are the value
types :class:`ModelRequest` and :class:`ModelResponse` (re-exported here from lev_nb.messages).
"""

from __future__ import annotations

from lev_nb.messages import ModelRequest, ModelResponse, ToolCall, Usage
from lev_nb.providers.anthropic import AnthropicProvider
from lev_nb.providers.base import ERROR_KINDS, Provider, ProviderError, call_complete
from lev_nb.providers.mock import MockModel
from lev_nb.providers.openai import OpenAIProvider
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
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "ScriptFileError",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "call_complete",
    "provider_for",
    "register_provider",
    "resolve_model",
]

"""Model backends behind one Provider protocol: anthropic (Claude), scripted (canned turns), mock (dry run)."""

from __future__ import annotations

from lev_nb.providers.anthropic import AnthropicProvider
from lev_nb.providers.base import (
    ERROR_KINDS,
    Block,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderError,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
    estimate_tokens,
)
from lev_nb.providers.mock import MockModel
from lev_nb.providers.resolve import (
    ModelOverride,
    provider_for,
    register_provider,
    resolve_model,
)
from lev_nb.providers.scripted import ScriptedModel, ScriptError

__all__ = [
    "ERROR_KINDS",
    "AnthropicProvider",
    "Block",
    "Message",
    "MockModel",
    "ModelOverride",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderError",
    "ScriptError",
    "ScriptedModel",
    "TextBlock",
    "ToolCall",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "Usage",
    "estimate_tokens",
    "provider_for",
    "register_provider",
    "resolve_model",
]

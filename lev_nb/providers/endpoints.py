"""Where each built-in provider is reached and where its key is read from: the Anthropic key's
variable and the per-call timeout, and the OpenAI-compatible flavours (openai, openrouter, ollama)
with their key variables and base URLs (docs/providers.md).

Kept apart from the provider classes so that what only asks "is this provider configured here?"
(``lev validate``, the launch check) reads these facts without importing the providers, their
HTTP clients and asyncio.
"""

from __future__ import annotations

from lev_nb.records import record

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "DEFAULT_TIMEOUT_S", "FLAVOURS", "Flavour", "OLLAMA_DEFAULT", "ollama_base_url"]

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
# The upstream runtime's per-call timeout; a stage's request_timeout_secs overrides it.
DEFAULT_TIMEOUT_S = 900.0
OLLAMA_DEFAULT = "http://localhost:11434"


@record
class Flavour:
    """What one OpenAI-compatible provider needs: its display ``label``, the variable that holds its
    key (``key_env``; None: no key needed), its base URL variable and default, and whether the
    answer's cap is sent as ``max_completion_tokens`` (OpenAI's own API, which its reasoning models
    require) or as ``max_tokens`` (what compatible servers read)."""

    label: str
    key_env: str | None
    base_url_env: str | None = None
    default_base_url: str | None = None
    completion_tokens_key: str = "max_tokens"
    prompt_cache_key: bool = False  # send a stable prompt_cache_key (OpenAI routes cached prefixes by it)


#: The built-in OpenAI-compatible providers, under the upstream runtime's names and defaults.
FLAVOURS: dict[str, Flavour] = {
    "openai": Flavour("OpenAI", "OPENAI_API_KEY", "OPENAI_BASE_URL", None, "max_completion_tokens", True),
    "openrouter": Flavour("OpenRouter", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1"),
    "ollama": Flavour("Ollama", None, "OLLAMA_HOST", OLLAMA_DEFAULT),
}


def ollama_base_url(value: str | None) -> str:
    """The Chat Completions endpoint of an Ollama server given as ``OLLAMA_HOST`` spells it
    (``host:port``, a URL, or nothing: ``http://localhost:11434``): a URL ending in ``/v1``."""
    text = (value or "").strip() or OLLAMA_DEFAULT
    if "://" not in text:
        text = f"http://{text}"
    text = text.rstrip("/")
    return text if text.endswith("/v1") else f"{text}/v1"

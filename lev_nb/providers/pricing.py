"""What a model call costs: a small dated table of published prices, the configuration's own
prices over it, and run totals that keep "unknown" apart from "zero".

Prices are USD per million tokens, four rates per model because a provider bills each input class
differently: fresh input, input read from the prompt cache (a fraction of the input rate), input
written to the cache (above it) and output. Usage follows the Anthropic convention, where
``prompt_tokens`` counts fresh input only and the two cache counts are separate (the Anthropic provider maps
``input_tokens``, ``cache_read_input_tokens`` and ``cache_creation_input_tokens``;
docs/providers.md#usage-and-prices).

The rule: a price is never guessed. A model the table does not list and the configuration does not
price has no cost (``None``), its tokens are still counted, and a run total with any such call is
``None`` as well, with the priced part kept beside it. A model id matches a table entry exactly, or
as that entry plus a dated snapshot suffix (``-20250929``) or ``-latest``; nothing looser, so a new
model never borrows an old model's price.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from lev_nb.messages import Usage
from lev_nb.records import record

__all__ = [
    "OPENAI_PRICES_READ_ON",
    "OPENAI_PRICES_SOURCE",
    "PRICES_READ_ON",
    "PRICES_SOURCE",
    "PUBLISHED_PRICES",
    "FREE_PROVIDERS",
    "CostTotals",
    "ModelPricing",
    "call_cost",
    "price_for",
]


@record
class ModelPricing:
    """One model's rates in USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float
    cache_write_per_mtok: float

    def cost(self, usage: Usage) -> float:
        """The USD cost of one call's ``usage`` at these rates."""
        return (
            usage.prompt_tokens * self.input_per_mtok
            + usage.cached_tokens * self.cached_input_per_mtok
            + usage.cache_write_tokens * self.cache_write_per_mtok
            + usage.completion_tokens * self.output_per_mtok
        ) / 1_000_000


#: When the table below was last read against the provider's published pricing page.
PRICES_READ_ON = "2026-12-01"
PRICES_SOURCE = "Anthropic's published model pricing (standard API, 5-minute cache writes)"


def _anthropic(input_: float, output: float, cache_read: float, cache_write: float) -> ModelPricing:
    return ModelPricing(input_, output, cache_read, cache_write)


_OPUS_NEW = _anthropic(5.0, 25.0, 0.50, 6.25)
_OPUS_OLD = _anthropic(15.0, 75.0, 1.50, 18.75)
_SONNET = _anthropic(3.0, 15.0, 0.30, 3.75)

#: (provider, model id) -> rates. Batch, long-context (>200K input on Sonnet 4/4.5) and 1-hour
#: cache-write rates are not modelled: calls are priced at the standard rates.
PUBLISHED_PRICES: dict[tuple[str, str], ModelPricing] = {
    ("anthropic", "claude-fable-5-1"): _anthropic(10.0, 50.0, 0.25, 12.50),
    ("anthropic", "claude-fable-5"): _anthropic(10.0, 50.0, 1.00, 12.50),
    ("anthropic", "claude-opus-5"): _OPUS_NEW,
    ("anthropic", "claude-opus-4-8"): _OPUS_NEW,
    ("anthropic", "claude-opus-4-7"): _OPUS_NEW,
    ("anthropic", "claude-opus-4-6"): _OPUS_NEW,
    ("anthropic", "claude-opus-4-5"): _OPUS_NEW,
    ("anthropic", "claude-opus-4-1"): _OPUS_OLD,
    ("anthropic", "claude-opus-4-0"): _OPUS_OLD,
    ("anthropic", "claude-opus-4"): _OPUS_OLD,
    ("anthropic", "claude-sonnet-4-6"): _SONNET,
    ("anthropic", "claude-sonnet-4-5"): _SONNET,
    ("anthropic", "claude-sonnet-4-0"): _SONNET,
    ("anthropic", "claude-sonnet-4"): _SONNET,
    ("anthropic", "claude-3-7-sonnet"): _SONNET,
    ("anthropic", "claude-haiku-4-5"): _anthropic(1.0, 5.0, 0.10, 1.25),
    ("anthropic", "claude-3-5-haiku"): _anthropic(0.80, 4.0, 0.08, 1.0),
    ("anthropic", "claude-3-haiku"): _anthropic(0.25, 1.25, 0.03, 0.30),
}

def _openai(input_: float, output: float, cached: float) -> ModelPricing:
    # OpenAI bills no cache write: a prefix it caches costs the input rate the first time.
    return ModelPricing(input_, output, cached, input_)


#: When the OpenAI rows were last checked, and against what. OpenAI's pricing page itself could not
#: be read from here; every row below agrees with copies of its standard-tier text table (input,
#: cached input, output per 1M tokens) kept in public repositories, and the gpt-5-mini and gpt-4.1
#: rows also with the dated per-token table of GitHub's Copilot documentation (read 2026-12-02).
#: The gpt-5.1 to gpt-5.5 rows were added on that date from the same Copilot table and two
#: independent write-ups of OpenAI's page; their long-context tier (over 272K input tokens, twice
#: the input rate) is not modelled. Newer families billed with a cache-write rate (GPT-5.6) are
#: not listed: their API model ids could not be confirmed, and an unlisted model is never guessed.
OPENAI_PRICES_READ_ON = "2026-12-02"
OPENAI_PRICES_SOURCE = ("OpenAI's published API pricing (standard tier), as copied in public repositories "
                        "and GitHub's Copilot per-token price table; the page itself was not reachable")
PUBLISHED_PRICES.update({
    ("openai", "gpt-5.5"): _openai(5.0, 30.0, 0.50),
    ("openai", "gpt-5.4"): _openai(2.50, 15.0, 0.25),
    ("openai", "gpt-5.4-mini"): _openai(0.75, 4.50, 0.075),
    ("openai", "gpt-5.4-nano"): _openai(0.20, 1.25, 0.02),
    ("openai", "gpt-5.2"): _openai(1.75, 14.0, 0.175),
    ("openai", "gpt-5.1"): _openai(1.25, 10.0, 0.125),
    ("openai", "gpt-5"): _openai(1.25, 10.0, 0.125),
    ("openai", "gpt-5-mini"): _openai(0.25, 2.0, 0.025),
    ("openai", "gpt-5-nano"): _openai(0.05, 0.40, 0.005),
    ("openai", "gpt-4.1"): _openai(2.0, 8.0, 0.50),
    ("openai", "gpt-4.1-mini"): _openai(0.40, 1.60, 0.10),
    ("openai", "gpt-4.1-nano"): _openai(0.10, 0.40, 0.025),
    ("openai", "gpt-4o"): _openai(2.50, 10.0, 1.25),
    ("openai", "gpt-4o-mini"): _openai(0.15, 0.60, 0.075),
    ("openai", "o3"): _openai(2.0, 8.0, 0.50),
    ("openai", "o4-mini"): _openai(1.10, 4.40, 0.275),
})

#: Providers that run locally and bill nothing: their calls cost a known zero (Ollama serves
#: models on the user's own machine).
FREE_PROVIDERS = frozenset({"mock", "scripted", "ollama"})
_FREE = ModelPricing(0.0, 0.0, 0.0, 0.0)

_SNAPSHOT = re.compile(r"^-(?:\d{8}|latest)$")


def _lookup(table: Mapping[str, Any], model: str) -> Any:
    """``table[model]``, or the entry ``model`` is a dated snapshot (or ``-latest``) of."""
    if model in table:
        return table[model]
    for name, value in table.items():
        if model.startswith(name) and _SNAPSHOT.match(model[len(name):]):
            return value
    return None


def price_for(provider: str, model: str, configured: Mapping[str, Any] | None = None) -> ModelPricing | None:
    """The rates of ``provider/model``: the configuration's (``[model_providers.<provider>.prices]``,
    given as ``configured``), else the published table's, else None (no price is guessed).
    The offline providers (``mock``, ``scripted``) cost nothing."""
    if provider in FREE_PROVIDERS:
        return _FREE
    if configured:
        own = _lookup(configured, model)
        if own is not None:
            return _from_config(own)
    return _lookup(_published(provider), model)


_by_provider: dict[str, dict[str, ModelPricing]] = {}


def _published(provider: str) -> dict[str, ModelPricing]:
    """The published table's entries of ``provider``, by model (built once a provider: every
    model call is priced)."""
    table = _by_provider.get(provider)
    if table is None:
        table = _by_provider[provider] = {m: p for (prov, m), p in PUBLISHED_PRICES.items() if prov == provider}
    return table


def _from_config(entry: Any) -> ModelPricing:
    """A configured price entry (a settings ModelPrice or a plain mapping) as ModelPricing.

    Cache rates left out bill like fresh input, which is what a provider without prompt-cache
    pricing charges.
    """
    get = entry.get if isinstance(entry, Mapping) else lambda key: getattr(entry, key, None)
    input_rate = float(get("input_per_mtok") or 0.0)
    cached = get("cached_input_per_mtok")
    written = get("cache_write_per_mtok")
    return ModelPricing(
        input_per_mtok=input_rate,
        output_per_mtok=float(get("output_per_mtok") or 0.0),
        cached_input_per_mtok=input_rate if cached is None else float(cached),
        cache_write_per_mtok=input_rate if written is None else float(written),
    )


def call_cost(usage: Usage, pricing: ModelPricing | None) -> float | None:
    """The USD cost of one call, or None when its model has no known price."""
    return None if pricing is None else pricing.cost(usage)


@record(frozen=False)
class CostTotals:
    """Token and money totals over a set of calls (a stage, a run).

    ``priced_usd`` sums the calls that had a price; ``unpriced_calls`` counts those that did not,
    and while there is any, :attr:`cost_usd` is None rather than a total that silently leaves
    them out.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    priced_usd: float = 0.0
    unpriced_calls: int = 0
    models: dict[str, int] = field(default_factory=dict)

    def add(self, usage: Usage, cost: float | None, model: str = "") -> None:
        """Fold one call in (``cost`` None: its model has no price)."""
        self.calls += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_tokens += usage.cached_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if cost is None:
            self.unpriced_calls += 1
        else:
            self.priced_usd += cost
        if model:
            self.models[model] = self.models.get(model, 0) + 1

    def absorb(self, other: CostTotals) -> None:
        """Fold another set of totals in (a worker run's, into its parent's)."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.priced_usd += other.priced_usd
        self.unpriced_calls += other.unpriced_calls
        for model, calls in other.models.items():
            self.models[model] = self.models.get(model, 0) + calls

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CostTotals:
        """Totals read back from :meth:`to_dict` data (a run record's ``usage`` entry); missing or
        malformed counts read as zero."""
        data = data if isinstance(data, Mapping) else {}

        def count(key: str) -> int:
            value = data.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        priced = data.get("priced_usd")
        models = data.get("models")
        return cls(
            calls=count("calls"), prompt_tokens=count("prompt_tokens"), completion_tokens=count("completion_tokens"),
            cached_tokens=count("cached_tokens"), cache_write_tokens=count("cache_write_tokens"),
            priced_usd=float(priced) if isinstance(priced, (int, float)) and not isinstance(priced, bool) else 0.0,
            unpriced_calls=count("unpriced_calls"),
            models={str(k): v for k, v in models.items() if isinstance(v, int)} if isinstance(models, Mapping) else {},
        )

    @property
    def cost_usd(self) -> float | None:
        """The total in USD, or None while any call could not be priced."""
        return None if self.unpriced_calls else round(self.priced_usd, 6)

    def to_dict(self) -> dict[str, Any]:
        """The totals as JSON-ready data (meta.json's ``usage`` entries)."""
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": self.cost_usd,
            "priced_usd": round(self.priced_usd, 6),
            "unpriced_calls": self.unpriced_calls,
            "models": dict(self.models),
        }

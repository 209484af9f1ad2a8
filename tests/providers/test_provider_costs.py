"""Prompt caching and what calls cost: where the ``cache_control`` markers go (spec/runtime.md §3.2,
§13.1), the price table and its configuration override, and usage and cost per call, per stage and
per run in the run record, ``run.usage`` and ``lev ps``, against the Messages API stand-in."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standin import API_KEY, Recorded, Reply, StandIn, message, serve, text, tool_use

from lev_nb.engine.context.hints import BATCH_TOOL_HINT
from lev_nb.messages import Message, ModelRequest, SystemBlock, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from lev_nb.providers import AnthropicProvider
from lev_nb.providers.anthropic import build_request_body, cache_marker_positions
from lev_nb.providers.pricing import PUBLISHED_PRICES, CostTotals, ModelPricing, price_for

LONG = "x" * 4400  # ~1100 estimated tokens: long enough to be worth a cache marker


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    yield from serve()


def block(text_: str, volatility: str = "stable", tier: int = 0) -> SystemBlock:
    return SystemBlock(text_, "r", volatility, tier)


def conversation(n: int, flagged: bool = True) -> list[Message]:
    messages = [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(n)]
    if flagged:
        messages[max(0, n - 4)].cache_breakpoint = True
    return messages


# ----------------------------------------------------------------------------- marker placement
def test_system_markers_go_on_the_deepest_stable_prefix_and_the_deepest_candidate() -> None:
    system = [block(LONG), block("more stable"), block("grows", "grows", 1), block("rewritten", "rewritten", 1)]
    marks, messages = cache_marker_positions(system, [])
    assert marks == [1, 2]  # the stable run ends at 1; the deepest non-rewritten block is 2
    assert messages == []


def test_short_prefixes_and_never_cached_blocks_get_no_marker() -> None:
    assert cache_marker_positions([block("short")], []) == ([], [])
    # A temporary region (tier 2) is never marked, and it ends the stable run.
    assert cache_marker_positions([block(LONG, "stable", 2)], []) == ([], [])
    assert cache_marker_positions([block(LONG, "rewritten", 1)], []) == ([], [])


def test_message_markers_need_the_assemblers_flag() -> None:
    assert cache_marker_positions([], conversation(40, flagged=False)) == ([], [])


def test_message_markers_sit_at_every_sixteenth_block_keeping_the_last_ones() -> None:
    marks, chosen = cache_marker_positions([block(LONG)], conversation(70))
    # Crossings at messages 15, 31, 47, 63; one system marker leaves three for the messages.
    assert marks == [0]
    assert chosen == [31, 47, 63]


def test_without_a_crossing_the_last_message_is_marked() -> None:
    assert cache_marker_positions([], conversation(5)) == ([], [4])


def test_block_messages_count_their_blocks_and_the_marker_goes_on_the_last_block() -> None:
    tool_turns: list[Message] = [Message("user", "go")]
    for i in range(8):
        tool_turns.append(Message("assistant", [TextBlock("calling"), ToolUseBlock(f"t{i}", "list_dir", {})]))
        tool_turns.append(Message("user", [ToolResultBlock(f"t{i}", "ok")]))
    tool_turns[-4].cache_breakpoint = True
    request = ModelRequest(provider="anthropic", model="m", messages=tool_turns)
    body = build_request_body(request)
    # 1 + 8 * (2 + 1) = 25 blocks: the count crosses 16 at the 11th message (index 10).
    marked = [i for i, m in enumerate(body["messages"]) if isinstance(m["content"], list)
              and any("cache_control" in b for b in m["content"])]
    assert marked == [10]
    assert body["messages"][10]["content"][-1] == {
        "type": "tool_result", "tool_use_id": "t4", "content": "ok", "is_error": False,
        "cache_control": {"type": "ephemeral"}}


def test_never_more_than_four_markers_and_none_without_caching() -> None:
    system = [block(LONG), block("grows " + LONG, "grows", 1)]
    request = ModelRequest(provider="anthropic", model="m", system=[b.text for b in system], system_blocks=system,
                           messages=conversation(200))
    body = json.dumps(build_request_body(request))
    assert body.count("cache_control") == 4
    assert "cache_control" not in json.dumps(build_request_body(request, cache=False))


def test_a_single_marked_system_block_is_sent_as_a_list() -> None:
    request = ModelRequest(provider="anthropic", model="m", system=[LONG], system_blocks=[block(LONG)],
                           messages=[Message("user", "hi")])
    assert build_request_body(request)["system"] == [
        {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    plain = ModelRequest(provider="anthropic", model="m", system=[LONG], messages=[Message("user", "hi")])
    assert build_request_body(plain)["system"] == LONG  # nothing known about it: not marked


def test_the_markers_reach_the_wire(stand_in: StandIn) -> None:
    stand_in.queue(Reply(body=message(text("ok"))))
    provider = AnthropicProvider("claude-sonnet-4-6", api_key=API_KEY, base_url=stand_in.url)
    request = ModelRequest(provider="anthropic", model="claude-sonnet-4-6", system=[LONG, "tail"],
                           system_blocks=[block(LONG), block("tail", "rewritten", 1)], messages=conversation(6))
    asyncio.run(provider.complete(request))
    sent = stand_in.requests[0].body
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in sent["system"][1]
    assert sent["messages"][5]["content"] == [{"type": "text", "text": "m5", "cache_control": {"type": "ephemeral"}}]


# ---------------------------------------------------------------------------------------- prices
def test_published_prices_match_exact_ids_and_dated_snapshots_only() -> None:
    sonnet = PUBLISHED_PRICES[("anthropic", "claude-sonnet-4-5")]
    assert price_for("anthropic", "claude-sonnet-4-5") == sonnet
    assert price_for("anthropic", "claude-sonnet-4-5-20250929") == sonnet
    assert price_for("anthropic", "claude-opus-4-20250514") == PUBLISHED_PRICES[("anthropic", "claude-opus-4")]
    # A model the table does not know never borrows a neighbour's price.
    assert price_for("anthropic", "claude-opus-4-9") is None
    assert price_for("anthropic", "claude-sonnet-4-5-preview") is None
    assert price_for("openai", "claude-sonnet-4-5") is None
    assert price_for("mock", "anything") == ModelPricing(0.0, 0.0, 0.0, 0.0)


def test_openai_rows_bill_cached_input_at_its_own_rate_and_no_cache_write() -> None:
    # gpt-5.4-mini is not gpt-5.4 with a suffix: each family member has its own row.
    assert price_for("openai", "gpt-5.4-mini") == ModelPricing(0.75, 4.50, 0.075, 0.75)
    # A dated OpenAI snapshot may be priced apart (gpt-4o-2024-05-13 was): it is not matched to its base.
    assert price_for("openai", "gpt-5.4-2026-03-05") is None
    assert price_for("openai", "gpt-4o-mini") == ModelPricing(0.15, 0.60, 0.075, 0.15)
    assert price_for("openai", "gpt-5.6-sol") is None  # not confirmed: counted, never guessed


def test_the_configuration_prices_a_model_and_overrides_the_table() -> None:
    configured = {"claude-sonnet-4-6": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
                  "my-model": {"input_per_mtok": 0.5, "output_per_mtok": 1.5, "cached_input_per_mtok": 0.05}}
    assert price_for("anthropic", "claude-sonnet-4-6", configured) == ModelPricing(1.0, 2.0, 1.0, 1.0)
    assert price_for("gateway", "my-model", configured) == ModelPricing(0.5, 1.5, 0.05, 0.5)


def test_each_input_class_bills_at_its_own_rate_and_unknown_stays_unknown() -> None:
    rates = ModelPricing(input_per_mtok=10, output_per_mtok=50, cached_input_per_mtok=1, cache_write_per_mtok=12.5)
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000, cached_tokens=1_000_000,
                  cache_write_tokens=1_000_000)
    assert rates.cost(usage) == 10 + 50 + 1 + 12.5
    totals = CostTotals()
    totals.add(usage, rates.cost(usage), "a/b")
    assert totals.cost_usd == 73.5
    totals.add(Usage(prompt_tokens=5), None, "a/unknown")
    assert totals.cost_usd is None  # a partial total is not offered as the cost
    assert (totals.priced_usd, totals.unpriced_calls, totals.calls) == (73.5, 1, 2)
    assert CostTotals().cost_usd == 0.0  # no calls: a known zero


# ------------------------------------------------------------------------------------- in a run
BLUEPRINT = f"""
[agent]
name = "priced"
[context.regions.brief]
kind = "pinned"
volatility = "stable"
max_tokens = 4000
seed = {{ literal = "{LONG}" }}
[tool_permissions]
list_dir = "allow"
[stages.look]
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
available_tools = ["list_dir"]
[stages.look.transitions.wrap]
[stages.wrap]
model = {{ provider = "anthropic", model = "MODEL" }}
nudge = {{ enabled = false }}
[stages.wrap.transitions]
"""

USAGE = {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 3000,
         "cache_creation_input_tokens": 400}


def priced_answer(recorded: Recorded) -> Reply:
    """One list_dir call in the first stage, then text answers."""
    body = recorded.body
    tools = [t["name"] for t in body.get("tools", [])]
    last = body["messages"][-1]
    answered = isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"])
    if tools and not answered:
        return Reply(body=message(tool_use("toolu_1", "list_dir", {"path": "."}), stop="tool_use", usage=USAGE))
    return Reply(body=message(text("done"), usage=USAGE))


def run_priced(stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrap_model: str) -> Any:
    from lev_nb import load

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    stand_in.responder = priced_answer
    run = load(BLUEPRINT.replace("MODEL", wrap_model)).run("look around", home=tmp_path / "home")
    run.wait(60)
    assert run.status == "complete", run.error
    return run


def sonnet_call_cost() -> float:
    return (1000 * 3.0 + 200 * 15.0 + 3000 * 0.30 + 400 * 3.75) / 1_000_000


@pytest.mark.usefixtures("blueprint_permissions")
def test_a_run_records_usage_and_cost_per_call_stage_and_run(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = run_priced(stand_in, tmp_path, monkeypatch, "claude-haiku-4-5")
    haiku = (1000 * 1.0 + 200 * 5.0 + 3000 * 0.10 + 400 * 1.25) / 1_000_000
    # look: tool call + answer; routing is not needed (one edge); wrap: one answer.
    calls = [e for e in run.events.snapshot() if e.kind == "model_call"]
    assert [(c.stage, c.model) for c in calls] == [
        ("look", "claude-sonnet-4-6"), ("look", "claude-sonnet-4-6"), ("wrap", "claude-haiku-4-5")]
    assert all((c.cached_tokens, c.cache_write_tokens) == (3000, 400) for c in calls)
    assert calls[0].cost_usd == pytest.approx(sonnet_call_cost())
    assert calls[2].cost_usd == pytest.approx(haiku)
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["cost_usd"] == pytest.approx(2 * sonnet_call_cost() + haiku)
    assert (meta["cached_tokens"], meta["cache_write_tokens"]) == (9000, 1200)
    by_stage = meta["usage"]["by_stage"]
    assert by_stage["look"]["calls"] == 2 and by_stage["look"]["cost_usd"] == pytest.approx(2 * sonnet_call_cost())
    assert by_stage["wrap"]["models"] == {"anthropic/claude-haiku-4-5": 1}
    assert meta["usage"]["total"]["prompt_tokens"] == 3000
    assert run.usage["cost_usd"] == meta["cost_usd"]
    assert run.usage["by_stage"]["wrap"]["cached_tokens"] == 3000


@pytest.mark.usefixtures("blueprint_permissions")
def test_the_stable_region_is_marked_and_later_turns_mark_the_conversation(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_priced(stand_in, tmp_path, monkeypatch, "claude-haiku-4-5")
    first, second = stand_in.requests[0].body, stand_in.requests[1].body
    # The batch hint leads the stable prefix; the marker closes it, after the pinned brief.
    assert first["system"][0]["text"] == BATCH_TOOL_HINT and "cache_control" not in first["system"][0]
    assert first["system"][1]["text"].startswith("## brief")
    assert first["system"][1]["cache_control"] == {"type": "ephemeral"}
    # The first request of the run has no earlier prefix to reuse; the second, same system, does.
    assert "cache_control" not in json.dumps(first["messages"])
    assert "cache_control" in json.dumps(second["messages"][-1])


@pytest.mark.usefixtures("blueprint_permissions")
def test_an_unknown_model_shows_tokens_without_a_price(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lev: Any
) -> None:
    run = run_priced(stand_in, tmp_path, monkeypatch, "claude-unreleased-9")
    meta = run.meta
    assert meta["cost_usd"] is None
    assert meta["usage"]["total"]["priced_usd"] == pytest.approx(2 * sonnet_call_cost())
    assert meta["usage"]["total"]["unpriced_calls"] == 1
    assert meta["usage"]["by_stage"]["wrap"]["cost_usd"] is None
    assert meta["usage"]["by_stage"]["wrap"]["completion_tokens"] == 200
    listing = lev("ps")
    assert "COST" in listing.stdout and "13800 tok (no price)" in listing.stdout
    rows = json.loads(lev("ps", "--json").stdout)["finished"]
    assert rows[0]["cost_usd"] is None and rows[0]["tokens"] == 13800


def test_configured_prices_price_an_unlisted_model(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lev: Any, blueprint_permissions: Path
) -> None:
    with blueprint_permissions.open("a", encoding="utf-8") as config:
        config.write('[model_providers.anthropic.prices."claude-unreleased-9"]\ninput_per_mtok = 2\noutput_per_mtok = 10\n')
    run = run_priced(stand_in, tmp_path, monkeypatch, "claude-unreleased-9")
    custom = (1000 * 2 + 200 * 10 + 3000 * 2 + 400 * 2) / 1_000_000  # cache classes bill like input
    assert run.meta["cost_usd"] == pytest.approx(2 * sonnet_call_cost() + custom)
    assert f"${run.meta['cost_usd']:.4f}" in lev("ps").stdout

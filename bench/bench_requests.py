"""Benchmark building model requests for a 50-turn conversation over 8 context regions, and what
prompt caching saves.

Each turn the simulated agent calls a tool, gets a result, appends a note and updates a fact, as a
long run does; then the next request is built the way the engine builds it: the context assembled
into described system blocks and messages (``assemble_blocks``), the conversation's cache flag set,
and the Anthropic Messages API body written (``build_request_body``) with and without caching
markers. Nothing is sent.

Two runs of the same conversation: one where notes, facts and scratch regions are written every
turn (so the system prompt changes and only its stable prefix can be cached), one where only the
conversation grows (so the conversation is cached too). Measured per turn: the time to build a request (assembly + body + JSON encoding), the bytes of the
body, and the bytes the API would bill as fresh input. Fresh bytes follow the API's prompt cache: a
prefix that ends at a marker of an earlier request (tools, then system blocks, then message blocks,
looked up to 20 blocks back from each marker) is read from the cache; the rest is fresh. Without
markers every byte is fresh. Prints a table and writes bench/results/requests.json.

    .venv/bin/python bench/bench_requests.py [--turns N] [--repeat N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lev_nb.blueprint.loader import load_text  # noqa: E402
from lev_nb.engine.context.assembly import flag_cache_breakpoint  # noqa: E402
from lev_nb.engine.context.run_context import build_context  # noqa: E402
from lev_nb.engine.plan.build import plan_from_blueprint  # noqa: E402
from lev_nb.messages import ModelRequest, ToolSpec  # noqa: E402
from lev_nb.providers.anthropic import build_request_body  # noqa: E402
from lev_nb.providers.pricing import PUBLISHED_PRICES  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "requests.json"
LOOKBACK_BLOCKS = 20
BYTES_PER_TOKEN = 4  # the runtime's estimate

BLUEPRINT = """
[agent]
name = "bench-requests"
[context.regions.system]
kind = "pinned"
volatility = "stable"
max_tokens = 6000
seed = { literal = "SYSTEM" }
[context.regions.task]
kind = "pinned"
volatility = "stable"
max_tokens = 2000
[context.regions.notes]
kind = "compacting"
volatility = "grows"
max_tokens = 40000
[context.regions.facts]
kind = "hashmap"
max_tokens = 8000
[context.regions.plan]
kind = "checklist"
volatility = "grows"
max_tokens = 4000
[context.regions.scratch]
kind = "temporary"
max_tokens = 6000
[context.regions.tool_results]
kind = "temporary"
max_tokens = 8000
[context.regions.conversation]
kind = "sliding_window"
max_items = 400
max_tokens = 150000
[stages.work]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
available_tools = ["read_file", "write_file", "shell"]
"""

SYSTEM_TEXT = ("You are a careful engineer working through a long refactoring task. " * 60).strip()
TOOLS = [ToolSpec(name, f"The {name} tool. " * 20, {"type": "object", "properties": {"path": {"type": "string"}}})
         for name in ("read_file", "write_file", "shell", "context_write", "todo_done")]


def make_context() -> Any:
    plan = plan_from_blueprint(load_text(BLUEPRINT))
    ctx = build_context(plan)
    ctx.enter_stage(plan.stage("work"))
    ctx.region("system").clear()
    ctx.seed("system", SYSTEM_TEXT)
    ctx.seed("task", "Task: split the billing module into three services, keeping every test green.")
    for i in range(12):
        ctx.region("plan").add_checklist_item(f"step {i}: move part {i} of the billing module")
    ctx.add_user("Start with the invoice code.")
    return ctx


def take_turn(ctx: Any, turn: int, regions_change: bool = True) -> None:
    """What one agent turn leaves in context: a tool call and its result and, when
    ``regions_change``, a note, a fact and scratch (which change the system prompt)."""
    from lev_nb.engine.context.regions import Entry

    ctx.add_assistant(f"Turn {turn}: reading the next file.",
                      [{"id": f"t{turn}", "name": "read_file", "input": {"path": f"src/billing/part_{turn}.py"}}])
    body = "\n".join(f"def function_{turn}_{k}(x):\n    return x * {k}  # part {turn}" for k in range(12))
    ctx.add_tool_result(f"t{turn}", "read_file", body)
    if not regions_change:
        return
    ctx.region("notes").add(Entry.make(f"turn {turn}: part_{turn}.py has 12 functions; moved 3 of them."))
    ctx.region("facts").add(Entry.make(f"owner of part {turn} is team {turn % 4}", key=f"part-{turn}"))
    ctx.region("scratch").add(Entry.make(f"scratch for turn {turn}: " + "x" * 300))
    if turn % 5 == 0:
        ctx.region("plan").update_checklist_item(turn // 5 + 1, done=True)


def blocks_of(body: dict[str, Any]) -> list[tuple[bytes, bool]]:
    """The body as the cache sees it: (bytes of each block in prefix order, whether it carries a marker)."""
    out: list[tuple[bytes, bool]] = [(json.dumps(body.get("tools", []), sort_keys=True).encode(), False)]
    system = body.get("system", [])
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        out.append((json.dumps(plain, sort_keys=True).encode(), "cache_control" in block))
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            out.append((message["role"].encode() + json.dumps(plain, sort_keys=True).encode(), "cache_control" in block))
    return out


class CacheModel:
    """Which prefixes earlier requests wrote to the cache, and how much of a request they cover."""

    def __init__(self) -> None:
        self.written: set[str] = set()

    def fresh_bytes(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(total, read from cache, written to cache) bytes of one request, then remember its writes."""
        blocks = blocks_of(body)
        digests, sizes = [], []
        running = hashlib.sha256()
        total = 0
        for data, _ in blocks:
            running.update(len(data).to_bytes(8, "big") + data)
            digests.append(running.copy().hexdigest())
            total += len(data)
            sizes.append(total)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        cached = 0
        for m in marks:
            for j in range(m, max(-1, m - LOOKBACK_BLOCKS), -1):
                if digests[j] in self.written:
                    cached = max(cached, sizes[j])
                    break
        written = max((sizes[m] for m in marks), default=0)
        for m in marks:
            self.written.add(digests[m])
        return total, cached, max(0, written - cached)


def run(turns: int, regions_change: bool) -> dict[str, Any]:
    ctx = make_context()
    cache = CacheModel()
    last_system: int | None = None
    rows = []
    for turn in range(1, turns + 1):
        take_turn(ctx, turn, regions_change)
        start = time.perf_counter()
        blocks, messages = ctx.assemble_blocks()
        system = [b.text for b in blocks]
        key = hash(tuple(system))
        flag_cache_breakpoint(messages, key != last_system)
        last_system = key
        request = ModelRequest(provider="anthropic", model="claude-sonnet-4-6", system=system, system_blocks=blocks,
                               messages=messages, tools=TOOLS, max_tokens=4096, temperature=0.7)
        assembled = time.perf_counter()
        cached_body = build_request_body(request)
        encoded = json.dumps(cached_body).encode()
        built = time.perf_counter()
        plain_body = build_request_body(request, cache=False)
        plain_bytes = len(json.dumps(plain_body).encode())
        total, read, written = cache.fresh_bytes(cached_body)
        rows.append({
            "turn": turn,
            "assemble_us": (assembled - start) * 1e6,
            "build_us": (built - assembled) * 1e6,
            "bytes_with_caching": len(encoded),
            "bytes_without_caching": plain_bytes,
            "markers": json.dumps(cached_body).count("cache_control"),
            "fresh_bytes_with_caching": total - read - written,
            "cache_read_bytes": read,
            "cache_write_bytes": written,
            "fresh_bytes_without_caching": total,
        })
    return {"rows": rows}


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    rows = samples[0]["rows"]
    per_turn = [statistics.median(s["rows"][i]["assemble_us"] + s["rows"][i]["build_us"] for s in samples)
                for i in range(len(rows))]
    assemble = [statistics.median(s["rows"][i]["assemble_us"] for s in samples) for i in range(len(rows))]
    sonnet = PUBLISHED_PRICES[("anthropic", "claude-sonnet-4-6")]

    def usd(fresh: int, read: int, written: int) -> float:
        per = 1 / BYTES_PER_TOKEN / 1_000_000
        return (fresh * sonnet.input_per_mtok + read * sonnet.cached_input_per_mtok
                + written * sonnet.cache_write_per_mtok) * per

    with_cache = sum(usd(r["fresh_bytes_with_caching"], r["cache_read_bytes"], r["cache_write_bytes"]) for r in rows)
    without = sum(usd(r["fresh_bytes_without_caching"], 0, 0) for r in rows)
    return {
        "turns": len(rows),
        "regions": 8,
        "build_us_per_turn": {"median": statistics.median(per_turn), "mean": statistics.mean(per_turn),
                              "p95": sorted(per_turn)[int(0.95 * (len(per_turn) - 1))],
                              "first": per_turn[0], "last": per_turn[-1]},
        "assemble_us_per_turn_median": statistics.median(assemble),
        "bytes_per_turn": {
            "with_caching_mean": statistics.mean(r["bytes_with_caching"] for r in rows),
            "without_caching_mean": statistics.mean(r["bytes_without_caching"] for r in rows),
            "fresh_with_caching_mean": statistics.mean(r["fresh_bytes_with_caching"] for r in rows),
            "fresh_without_caching_mean": statistics.mean(r["fresh_bytes_without_caching"] for r in rows),
            "last_turn": {k: rows[-1][k] for k in ("bytes_with_caching", "bytes_without_caching",
                                                   "fresh_bytes_with_caching", "cache_read_bytes",
                                                   "cache_write_bytes", "fresh_bytes_without_caching", "markers")},
        },
        "input_cost_usd_sonnet_4_6_estimate": {"with_caching": round(with_cache, 4), "without_caching": round(without, 4)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5, help="repeat the whole conversation, take medians")
    args = parser.parse_args()
    scenarios = {}
    for name, changing in (("regions_written_every_turn", True), ("only_the_conversation_grows", False)):
        samples = [run(args.turns, changing) for _ in range(args.repeat)]
        scenarios[name] = (summarise(samples), samples[0]["rows"])
        report(name, scenarios[name][0], args.repeat)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "benchmark": "requests",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "scenarios": {name: {"summary": summary, "per_turn": rows} for name, (summary, rows) in scenarios.items()},
    }, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


def report(name: str, summary: dict[str, Any], repeat: int) -> None:
    """Print one scenario."""
    print(f"== {name.replace('_', ' ')}")
    build = summary["build_us_per_turn"]
    size = summary["bytes_per_turn"]
    print(f"request building, {summary['turns']} turns x {summary['regions']} regions (median of {repeat} runs)")
    print(f"  per turn (assemble + body + JSON): median {build['median']:.0f} us, mean {build['mean']:.0f} us, "
          f"p95 {build['p95']:.0f} us; turn 1 {build['first']:.0f} us, turn {summary['turns']} {build['last']:.0f} us")
    print(f"  assembly alone: median {summary['assemble_us_per_turn_median']:.0f} us")
    print("bytes per turn (mean)              with caching   without caching")
    print(f"  request body                     {size['with_caching_mean']:>12.0f}   {size['without_caching_mean']:>15.0f}")
    print(f"  billed as fresh input            {size['fresh_with_caching_mean']:>12.0f}   "
          f"{size['fresh_without_caching_mean']:>15.0f}")
    last = size["last_turn"]
    print(f"  last turn: {last['bytes_with_caching']} bytes, {last['markers']} markers, {last['cache_read_bytes']} "
          f"read from cache, {last['cache_write_bytes']} written, {last['fresh_bytes_with_caching']} fresh")
    cost = summary["input_cost_usd_sonnet_4_6_estimate"]
    print(f"input cost of the {summary['turns']} requests at claude-sonnet-4-6 rates (4 bytes/token): "
          f"${cost['with_caching']:.4f} with caching, ${cost['without_caching']:.4f} without")


if __name__ == "__main__":
    main()

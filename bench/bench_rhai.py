"""Benchmark: per-call cost of Rhai (lev_nb.rhai) next to plain Python, Lua (lupa) and Starlark.

Not a test. Three cases, the same logic in each language:

  call_1kb   call a compiled function with a 1 KB string (it returns the length)
  validator  parse a ~1 KB JSON document and check two fields (Lua has no JSON parser of its own,
             so it calls Python's json.loads through lupa, as a host would)
  loop_10k   a 10,000-iteration summing loop

Prints a table (microseconds per call, best of several rounds) and writes bench/results/rhai.json.
Run: .venv/bin/python bench/bench_rhai.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lev_nb.rhai import RHAI_VERSION, Engine

RESULTS = Path(__file__).resolve().parent / "results" / "rhai.json"

TEXT_1KB = ("lev_nb " * 147)[:1024]
DOC = json.dumps(
    {
        "root": {"title": "report", "tags": ["a", "b", "c"]},
        "items": [{"id": i, "name": f"item-{i}", "score": i * 1.5, "ok": i % 2 == 0} for i in range(18)],
    }
)

RHAI_SOURCE = """
fn text_len(s) { s.len() }
fn validate(c) {
    let d = parse_json(c);
    if d.root == () { return "missing root"; }
    if d.items.len() == 0 { return "no items"; }
    ()
}
fn loop_10k() { let n = 0; for i in 0..10000 { n += i; } n }
"""

LUA_SOURCE = """
local M = {}
function M.text_len(s) return #s end
function M.validate(c)
    local d = json_loads(c)
    if d.root == nil then return "missing root" end
    if #d.items == 0 then return "no items" end
    return nil
end
function M.loop_10k() local n = 0 for i = 0, 9999 do n = n + i end return n end
return M
"""

STARLARK_SOURCE = """
def text_len(s):
    return len(s)

def validate(c):
    d = json.decode(c)
    if "root" not in d:
        return "missing root"
    if len(d["items"]) == 0:
        return "no items"
    return None

def loop_10k():
    n = 0
    for i in range(10000):
        n += i
    return n
"""


def py_text_len(s: str) -> int:
    """Plain-Python version of the 1 KB call."""
    return len(s)


def py_validate(c: str) -> str | None:
    """Plain-Python version of the validator."""
    d = json.loads(c)
    if d.get("root") is None:
        return "missing root"
    if len(d["items"]) == 0:
        return "no items"
    return None


def py_loop_10k() -> int:
    """Plain-Python version of the loop."""
    n = 0
    for i in range(10000):
        n += i
    return n


def rhai_cases() -> dict[str, Callable[[], object]]:
    engine = Engine(max_operations=1_000_000)
    ast = engine.compile(RHAI_SOURCE)
    return {
        "call_1kb": lambda: engine.call(ast, "text_len", TEXT_1KB),
        "validator": lambda: engine.call(ast, "validate", DOC),
        "loop_10k": lambda: engine.call(ast, "loop_10k"),
    }


def python_cases() -> dict[str, Callable[[], object]]:
    return {
        "call_1kb": lambda: py_text_len(TEXT_1KB),
        "validator": lambda: py_validate(DOC),
        "loop_10k": py_loop_10k,
    }


def lua_cases() -> dict[str, Callable[[], object]] | None:
    try:
        from lupa import LuaRuntime
    except ImportError:
        return None
    lua = LuaRuntime(unpack_returned_tuples=True)
    lua.globals().json_loads = lambda text: lua.table_from(json.loads(text), recursive=True)
    module = lua.execute(LUA_SOURCE)
    text_len, validate, loop_10k = module.text_len, module.validate, module.loop_10k
    return {
        "call_1kb": lambda: text_len(TEXT_1KB),
        "validator": lambda: validate(DOC),
        "loop_10k": loop_10k,
    }


def starlark_cases() -> dict[str, Callable[[], object]] | None:
    try:
        import starlark as sl
    except ImportError:
        return None
    module = sl.Module()
    sl.eval(module, sl.parse("bench.star", STARLARK_SOURCE), sl.Globals.extended_by([sl.LibraryExtension.Json]))
    frozen = module.freeze()
    return {
        "call_1kb": lambda: frozen.call("text_len", TEXT_1KB),
        "validator": lambda: frozen.call("validate", DOC),
        "loop_10k": lambda: frozen.call("loop_10k"),
    }


def check_agreement(suites: dict[str, dict[str, Callable[[], object]]]) -> None:
    """Every engine must compute the same answers, or the comparison means nothing."""
    expected = {"call_1kb": 1024, "validator": None, "loop_10k": sum(range(10000))}
    for engine, cases in suites.items():
        for case, fn in cases.items():
            got = fn()
            if got != expected[case]:
                raise SystemExit(f"{engine}/{case} returned {got!r}, expected {expected[case]!r}")


def time_per_call(fn: Callable[[], object], budget_s: float, rounds: int) -> float:
    """Best-of-`rounds` mean time per call in microseconds."""
    n = 1
    while True:  # calibrate: enough calls to fill a round
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= budget_s / rounds / 4 or n >= 1 << 20:
            break
        n *= 2
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return min(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter rounds (noisier figures)")
    args = parser.parse_args(argv)
    budget, rounds = (0.3, 3) if args.quick else (2.0, 7)

    suites: dict[str, dict[str, Callable[[], object]]] = {"rhai": rhai_cases(), "python": python_cases()}
    for name, make in (("lua (lupa)", lua_cases), ("starlark", starlark_cases)):
        cases = make()
        if cases is not None:
            suites[name] = cases
    check_agreement(suites)

    table: dict[str, dict[str, float]] = {}
    for case in ("call_1kb", "validator", "loop_10k"):
        table[case] = {engine: time_per_call(cases[case], budget, rounds) for engine, cases in suites.items()}

    engines = list(suites)
    header = f"{'case (us/call)':<16}" + "".join(f"{e:>14}" for e in engines) + f"{'rhai/lua':>10}"
    print(header)
    print("-" * len(header))
    ratios: dict[str, float | None] = {}
    for case, row in table.items():
        lua = row.get("lua (lupa)")
        ratios[case] = round(row["rhai"] / lua, 2) if lua else None
        ratio = f"{ratios[case]:>9.2f}x" if ratios[case] is not None else f"{'-':>10}"
        print(f"{case:<16}" + "".join(f"{row[e]:>14.2f}" for e in engines) + ratio)

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "unit": "microseconds per call (best of rounds)",
                "rhai_version": RHAI_VERSION,
                "python": sys.version.split()[0],
                "machine": platform.machine(),
                "rounds": rounds,
                "cases": {case: {e: round(v, 3) for e, v in row.items()} for case, row in table.items()},
                "rhai_over_lua": ratios,
                "geomean_rhai_over_lua": round(statistics.geometric_mean([r for r in ratios.values() if r]), 2)
                if any(ratios.values())
                else None,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nsaved {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

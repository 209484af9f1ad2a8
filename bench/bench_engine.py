"""Engine benchmark: overhead per model turn and per tool call, memory per concurrent run, drain time.

Not a test. Prints a table and writes bench/results/engine.json. Run it with:

    .venv/bin/python bench/bench_engine.py            # full: 100 / 1,000 / 10,000 concurrent runs
    .venv/bin/python bench/bench_engine.py --quick    # 100 / 1,000 only

* Overhead: a zero-latency ScriptedModel drives one stage through K turns. The same provider calls
  and tool handlers driven by a bare asyncio loop (no engine, no record) are the baseline, so the
  difference is what lev_nb's run loop, context, events and run record cost.
* Memory: N runs of a two-stage blueprint on a mock model that sleeps 50 ms per call, all started
  at once, each in a fresh subprocess. Live memory is PSS minus LazyFree (from
  /proc/self/smaps_rollup) sampled while every run is in flight, minus the same process's reading
  before the runs started.
* Drain time: from the first start to the last run's end, next to the ideal
  calls x latency / concurrency (every run in flight at once, so the ideal is one run's calls x 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import scratch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "engine.json"

# The same call 200 times would earn a loop nudge a turn (which the bare loop has no match for):
# the figure is the engine's turn, so the watch is off here.
STAGE_BLUEPRINT = """
[agent]
name = "bench"
[repetition_detection]
enabled = false
[stages.work]
mode = "autonomous"
model = { provider = "mock", model = "m" }
available_tools = ["current_time", "list_dir"]
max_iterations = 0
nudge = { enabled = false }
[stages.work.transitions]
"""

CONCURRENT_BLUEPRINT = """
[agent]
name = "bench-many"
[stages.work]
mode = "autonomous"
model = { provider = "mock", model = "m" }
available_tools = ["list_dir"]
max_iterations = 5
[stages.work.transitions.answer]
hint = "done"
[stages.answer]
mode = "output"
model = { provider = "mock", model = "m" }
max_iterations = 4
[stages.answer.transitions]
"""


def live_memory_kib() -> int:
    """PSS minus LazyFree of this process, in KiB."""
    fields: dict[str, int] = {}
    with open("/proc/self/smaps_rollup", encoding="ascii") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                fields[parts[0][:-1]] = int(parts[1])
    return fields.get("Pss", 0) - fields.get("LazyFree", 0)


# ---------------------------------------------------------------- overhead per turn / tool call
def overhead(turns: int, calls_per_turn: int, repeats: int, samples: bool = False) -> dict[str, Any]:
    """Median CPU seconds per turn (the whole process: engine thread and record writer included)
    for the engine and for the bare baseline; with ``samples``, every repeat's figures too."""
    from lev_nb.blueprint import load
    from lev_nb.engine.api import start_run
    from lev_nb.engine.pipeline.inference import RetryPolicy
    from lev_nb.providers import ScriptedModel

    def script() -> list[dict]:
        call = {"name": "current_time", "arguments": {}}
        steps = [{"text": "", "tool_calls": [dict(call) for _ in range(calls_per_turn)]} for _ in range(turns)]
        return steps + [{"text": "done"}]

    bp = load(STAGE_BLUEPRINT)
    engine_times, bare_times = [], []
    with scratch.folder() as home:
        for _ in range(repeats):
            start = time.process_time()
            run = start_run(
                bp, task="bench", model=ScriptedModel(script()), workdir=home, home=home,
                retry=RetryPolicy(max_attempts=1),
            )
            run.wait()
            assert run.status == "complete", run.error
            flush_records()
            engine_times.append((time.process_time() - start) / (turns + 1))
            bare_times.append(asyncio.run(_bare(script(), home)) / (turns + 1))
    out: dict[str, Any] = {"engine_s": statistics.median(engine_times), "bare_s": statistics.median(bare_times)}
    if samples:
        out["engine_samples"], out["bare_samples"] = engine_times, bare_times
    return out


def flush_records() -> None:
    """Wait until the record writer has written everything (its CPU counts as the engine's)."""
    from lev_nb.store.writer import record_writer

    record_writer().flush().result()


def chain_blueprint(stages: int) -> str:
    """``stages`` stages in a line, each with one hint edge to the next (no routing call needed)."""
    parts = ['[agent]\nname = "bench-chain"\n']
    for i in range(stages):
        parts.append(f'[stages.s{i}]\nmode = "autonomous"\nmodel = {{ provider = "mock", model = "m" }}\n'
                     'nudge = { enabled = false }\n')
        parts.append(f'[stages.s{i}.transitions.s{i + 1}]\nhint = "next"\n' if i + 1 < stages
                     else f"[stages.s{i}.transitions]\n")
    return "\n".join(parts)


def per_stage(stages: int, repeats: int) -> dict[str, Any]:
    """Median CPU seconds per stage of a chain (one text answer, then a transition), engine and bare."""
    from lev_nb.blueprint import load
    from lev_nb.engine.api import start_run
    from lev_nb.engine.pipeline.inference import RetryPolicy
    from lev_nb.providers import ScriptedModel

    bp = load(chain_blueprint(stages))
    engine_times, bare_times = [], []
    with scratch.folder() as home:
        for _ in range(repeats):
            steps = [{"text": f"stage {i} done"} for i in range(stages)]
            start = time.process_time()
            run = start_run(bp, task="bench", model=ScriptedModel(steps), workdir=home, home=home,
                            retry=RetryPolicy(max_attempts=1))
            run.wait()
            assert run.status == "complete" and len(run.stage_history) == stages, (run.status, run.error)
            flush_records()
            engine_times.append((time.process_time() - start) / stages)
            bare_times.append(asyncio.run(_bare([{"text": "done"}] * stages + [{"text": ""}], home, all_text=True))
                              / stages)
    return {"engine_s": statistics.median(engine_times), "bare_s": statistics.median(bare_times),
            "engine_samples": engine_times, "bare_samples": bare_times}


async def _bare(steps: list[dict], workdir: str, all_text: bool = False) -> float:
    """The same model answers and tool calls with no engine around them (CPU seconds); with
    ``all_text``, every step but the last empty one is a text answer."""
    from lev_nb.messages import ModelRequest
    from lev_nb.providers import ScriptedModel
    from lev_nb.tools.builtin import default_registry
    from lev_nb.tools.context import ToolContext
    from lev_nb.workspace import Workspace

    model = ScriptedModel(steps)
    registry = default_registry()
    ctx = ToolContext(workspace=Workspace(workdir))
    handler = registry.get("current_time").handler
    start = time.process_time()
    while True:
        response = await model.complete(ModelRequest(provider="scripted", model="m", stage="work"))
        if all_text:
            if not response.text:
                break
            continue
        if not response.tool_calls:
            break
        await asyncio.gather(*(handler(ctx, c.arguments) for c in response.tool_calls))
    return time.process_time() - start


# ---------------------------------------------------------------- memory and drain (subprocess)
# The inference pool ([limits] max_concurrent_inferences) for the concurrency measurements: as wide
# as the upstream runtime's own benchmarks use, so the engine, not the pool, is what is measured.
POOL_WIDTH = 512


# The realistic mix: the bundled agents (research-brief fans out to workers) next to the plain
# two-stage bench agent, in the proportions of the upstream runtime's own benchmark (30/30/20/20).
MIX = (("research-brief", 3), ("code-fixer", 3), ("triage", 2), (None, 2))


class CountingMock:
    """The mock model after a fixed latency, counting the calls it answers (children's included)."""

    name = "mock"

    def __init__(self, latency: float) -> None:
        from lev_nb.providers import MockModel

        self.inner = MockModel(latency_s=latency)
        self.calls = 0

    async def complete(self, request: Any) -> Any:
        self.calls += 1
        return await self.inner.complete(request)


def child(n: int, latency: float, pool: int = 0, mix: bool = False) -> None:
    """Runs in a subprocess: start n runs at once, report memory, drain time and CPU as JSON."""
    import gc

    from lev_nb.blueprint import load
    from lev_nb.engine.api import start_run
    from lev_nb.engine.loop import engine_loop

    import lev_nb

    pool = pool or POOL_WIDTH
    lev_nb.configure(max_concurrent_inferences=pool)
    plain = load(CONCURRENT_BLUEPRINT)
    kinds = [(load(ROOT / "blueprints" / name) if name else plain, name or "bench-many")
             for name, weight in (MIX if mix else ((None, 1),)) for _ in range(weight)]
    engine_loop()
    gc.collect()
    base = live_memory_kib()
    model = CountingMock(latency)
    with scratch.folder() as home:
        cpu0 = time.process_time()
        start = time.perf_counter()
        runs = [start_run(kinds[i % len(kinds)][0], task=f"item {i}: summarise the report", model=model, home=home)
                for i in range(n)]
        started = time.perf_counter() - start
        peak = 0
        while not all(r.done() for r in runs):
            peak = max(peak, live_memory_kib())
            time.sleep(0.02)
        drain = time.perf_counter() - start
        cpu = time.process_time() - cpu0
        statuses: dict[str, int] = {}
        longest = 0
        for r in runs:
            statuses[r.status] = statuses.get(r.status, 0) + 1
            longest = max(longest, sum(1 for e in r.events.snapshot() if e.kind == "model_call"))
    calls = model.calls
    print(json.dumps({
        "runs": n, "latency_s": latency, "mix": mix, "start_s": started, "drain_s": drain, "peak_live_kib": peak,
        "base_kib": base, "per_run_kib": (peak - base) / n, "statuses": statuses, "model_calls": calls,
        "cpu_s": cpu, "cpu_per_call_s": cpu / max(1, calls),
        # The longest path of one run, or the pool's throughput once the pool is the bottleneck.
        "ideal_s": max(longest * latency, calls * latency / pool),
        "pool": pool,
    }))


def concurrent(n: int, latency: float, pool: int = 0, mix: bool = False) -> dict:
    """One measurement in a fresh interpreter, so runs do not share leftovers."""
    cmd = [sys.executable, __file__, "--child", str(n), "--latency", str(latency), "--pool", str(pool or POOL_WIDTH)]
    out = subprocess.run(cmd + (["--mix"] if mix else []), capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run every measurement, print the tables and save the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 10,000-run measurement")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.05, help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--mix", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.latency, args.pool, args.mix)
        return

    turn = overhead(turns=200, calls_per_turn=1, repeats=5)
    batch = overhead(turns=50, calls_per_turn=10, repeats=5)
    per_tool = (batch["engine_s"] - turn["engine_s"]) / 9
    per_tool_bare = (batch["bare_s"] - turn["bare_s"]) / 9
    print("Engine overhead (zero-latency scripted model, median of 5)")
    print(f"{'':32}{'lev_nb engine':>16}{'bare loop':>14}{'difference':>14}")
    print(f"{'per model turn (1 tool call)':32}{turn['engine_s']*1e3:>13.3f} ms{turn['bare_s']*1e3:>11.3f} ms"
          f"{(turn['engine_s']-turn['bare_s'])*1e3:>11.3f} ms")
    print(f"{'per extra tool call in a batch':32}{per_tool*1e3:>13.3f} ms{per_tool_bare*1e3:>11.3f} ms"
          f"{(per_tool-per_tool_bare)*1e3:>11.3f} ms")

    sizes = [100, 1000] if args.quick else [100, 1000, 10000]
    rows = [concurrent(n, args.latency) for n in sizes]
    print()
    print(f"Concurrent runs on a mock model sleeping {args.latency*1e3:.0f} ms per call, inference pool {POOL_WIDTH}")
    print(f"{'runs':>7}{'live MiB':>10}{'KiB/run':>10}{'drain s':>10}{'ideal s':>10}{'ratio':>8}  statuses")
    for r in rows:
        print(f"{r['runs']:>7}{(r['peak_live_kib']-r['base_kib'])/1024:>10.1f}{r['per_run_kib']:>10.1f}"
              f"{r['drain_s']:>10.2f}{r['ideal_s']:>10.2f}{r['drain_s']/r['ideal_s']:>8.1f}  {r['statuses']}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "overhead": {"turn": turn, "batch_of_10": batch, "per_extra_tool_call_s": per_tool,
                     "per_extra_tool_call_bare_s": per_tool_bare},
        "concurrent": rows,
    }, indent=2) + "\n")
    print(f"\nsaved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

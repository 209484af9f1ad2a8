"""Every benchmark of lev_nb in one command, one table and one JSON file (issue 15).

    python -m bench            # full: 100 / 1,000 / 10,000 concurrent runs, more repeats
    python -m bench --quick    # a CI-sized pass (under two minutes on a 2-core machine)
    python -m bench --only script --big   # the provider-script workload at 1,000 agents too
    bench/run [--quick]        # the same, from any folder

Each figure is printed next to its baseline measured in the same run (median, and the spread as
min-max over the repeats), with the issue's target and whether it is met. The figures come from
the benchmark modules beside this file (bench_engine, bench_cli_startup, bench_first_run,
bench_validate, bench_rhai, bench_requests, bench_ps, bench_tracing, bench_runs, bench_schema_import,
bench_script_provider), called as functions. The results, with a description of
the machine, go to ``bench/results/<date>-<host>.json`` (``--out DIR`` to write elsewhere).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for entry in (str(ROOT), str(HERE)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import bench_cli_startup  # noqa: E402
import callgrind  # noqa: E402
import bench_engine  # noqa: E402
import bench_first_run  # noqa: E402
import bench_ps  # noqa: E402
import bench_record_writes  # noqa: E402
import bench_runs  # noqa: E402
import bench_rhai  # noqa: E402
import bench_schema_import  # noqa: E402
import bench_script_provider  # noqa: E402
import bench_turn_baseline  # noqa: E402
import bench_tracing  # noqa: E402
import bench_validate  # noqa: E402
import scratch  # noqa: E402


@dataclass
class Row:
    """One line of the table: a figure, its spread, its baseline, its target and the verdict."""

    group: str
    figure: str
    unit: str
    value: float
    spread: tuple[float, float] | None = None
    baseline: float | None = None
    baseline_label: str = ""
    target: float | None = None
    target_label: str = ""
    met: bool | None = None
    wall_ms: float | None = None  # cold starts: the wall time next to the CPU time judged

    def judge(self, ok: Callable[[float, float], bool] = lambda v, t: v < t) -> Row:
        """Set ``met`` against the target (by default: under it)."""
        if self.target is not None:
            self.met = ok(self.value, self.target)
        return self


def stats(values: list[float]) -> tuple[float, tuple[float, float]]:
    """The median and the (min, max) spread."""
    return statistics.median(values), (min(values), max(values))


# ------------------------------------------------------------------------------------------------ engine
def engine_rows(repeats: int) -> list[Row]:
    """CPU per model call, per tool call and per transition, against a bare asyncio loop."""
    bench_engine.overhead(turns=20, calls_per_turn=1, repeats=1)  # warm-up: imports, first-use caches
    turn = bench_engine.overhead(turns=200, calls_per_turn=1, repeats=repeats, samples=True)
    batch = bench_engine.overhead(turns=50, calls_per_turn=10, repeats=repeats, samples=True)
    chain = bench_engine.per_stage(stages=40, repeats=repeats)
    per_tool = [(b - t) / 9 for b, t in zip(batch["engine_samples"], turn["engine_samples"])]
    per_tool_bare = [(b - t) / 9 for b, t in zip(batch["bare_samples"], turn["bare_samples"])]
    per_call = [t - p for t, p in zip(turn["engine_samples"], per_tool)]
    per_call_bare = [t - p for t, p in zip(turn["bare_samples"], per_tool_bare)]
    per_transition = [c - m for c, m in zip(chain["engine_samples"], per_call)]
    per_transition_bare = [c - m for c, m in zip(chain["bare_samples"], per_call_bare)]
    ms = 1e3
    rows = []
    for label, values, bare, target in (
        ("engine CPU per model call", per_call, per_call_bare, 0.25),
        ("engine CPU per tool call", per_tool, per_tool_bare, None),
        ("engine CPU per transition", per_transition, per_transition_bare, None),
    ):
        median, spread = stats([v * ms for v in values])
        rows.append(Row("engine", label, "ms", median, spread, statistics.median(bare) * ms, "bare asyncio loop",
                        target, f"< {target} ms" if target else "").judge())
    return rows + turn_baseline_rows(repeats)


def turn_baseline_rows(repeats: int) -> list[Row]:
    """Issue 29's "per-turn work halved": a turn (one tool call) today against the code the issue
    was filed on, both measured in this pass (bench_turn_baseline); none without git history."""
    found = bench_turn_baseline.measure(max(5, repeats))
    if found is None:
        return []
    group = f"engine: a turn with one tool call, against {found['commit']} (issue 29 filed)"
    old, new = found["baseline"], found["today"]
    rows = [Row(group, "CPU per turn", "ms", new["cpu_s"] * 1e3, (new["cpu_spread_s"][0] * 1e3, new["cpu_spread_s"][1] * 1e3),
                old["cpu_s"] * 1e3, "the baseline", old["cpu_s"] * 1e3 / 2, "<= half the baseline").judge(
                    lambda v, t: v <= t)]
    if new["instructions"] is not None and old["instructions"] is not None:
        today, base = new["instructions"], old["instructions"]
        rows.append(Row(group, "instructions per turn, engine threads", "M", today["engine"] / 1e6, None,
                        base["engine"] / 1e6, "the baseline", base["engine"] / 2e6,
                        "<= half the baseline").judge(lambda v, t: v <= t))
        rows.append(Row(group, "  the caller's thread (script, wait, teardown)", "M", today["caller"] / 1e6, None,
                        base["caller"] / 1e6, "the baseline"))
    return rows


def tracing_rows(repeats: int) -> list[Row]:
    """CPU per model call and per tool call with OpenTelemetry tracing (OTLP/HTTP to a collector
    stand-in) against the same run untraced, and the tracer's own share measured alone."""
    found = bench_tracing.with_collector(lambda endpoint: bench_tracing.measure(repeats, endpoint=endpoint))
    off, otlp = found["off"], found["otlp"]
    alone = bench_tracing.direct()
    return [
        Row("tracing", "CPU per model call, traced (OTLP)", "ms", otlp["model_call_ms"],
            (otlp["model_call_min_ms"], otlp["model_call_max_ms"]), off["model_call_ms"], "untraced"),
        Row("tracing", "CPU per tool call, traced (OTLP)", "ms", otlp["tool_call_ms"],
            (otlp["tool_call_min_ms"], otlp["tool_call_max_ms"]), off["tool_call_ms"], "untraced"),
        Row("tracing", "tracer alone per model call", "us", alone["model_call_us"], None, None, ""),
    ]


def concurrent_rows(sizes: list[int], latency: float, pool: int) -> tuple[list[Row], list[dict[str, Any]]]:
    """N runs of the bundled-agent mix at once on a mock answering after ``latency``."""
    rows, raw = [], []
    for n in sizes:
        r = bench_engine.concurrent(n, latency, pool=pool, mix=True)
        raw.append(r)
        group = f"{n:,} runs at {latency * 1e3:g} ms"
        live_mib = (r["peak_live_kib"] - r["base_kib"]) / 1024
        rows.append(Row(group, "live memory per run", "KiB", r["per_run_kib"], baseline=r["base_kib"] / 1024,
                        baseline_label="MiB of the idle process"))
        if n >= 10_000:
            rows.append(Row(group, "live memory, all runs", "MiB", live_mib, target=1024.0,
                            target_label="< 1 GiB").judge())
        drain = Row(group, "drain", "s", r["drain_s"], baseline=r["ideal_s"], baseline_label="ideal")
        if latency >= 1.5:
            drain.target, drain.target_label = 2 * r["ideal_s"], "<= 2x ideal"
            drain.judge(lambda v, t: v <= t)
        rows.append(drain)
        rows.append(Row(group, "CPU per model call", "ms", r["cpu_per_call_s"] * 1e3,
                        baseline=None, baseline_label=f"{r['model_calls']:,} calls, {r['statuses']}"))
    return rows, raw


# ------------------------------------------------------------------------------------------------ provider scripts
# The upstream runtime's drain of the same workload (1,000 agents, 50 ms a call) on this machine (issue 29).
UPSTREAM_DRAIN_S = 27.0


HANDOVER_MESSAGES = 401  # "Begin." and 200 turns of a tool call and its result


def script_provider_rows(quick: bool, big: bool) -> tuple[list[Row], list[dict[str, Any]]]:
    """The issue-29 workload (bench_script_provider): agents whose model calls go through a Rhai
    provider script to a latency server; drain, CPU per call (script / engine), calls in flight,
    memory per run. The 1.5 s shape is the regression check on a fixed ceiling of calls in flight.
    CPU per model call is judged at the issue's workload (1,000 agents at 50 ms: at most 1.6 ms) and,
    at 100 agents, against the upstream's own figure at that size in the same pass."""
    repeats = 1 if quick else 3
    rows, raw = [], []
    bench_script_provider.cache_bytecode()
    for label, _n, _delay, fn in bench_script_provider.shapes(big):
        raw.append({"shape": label, **bench_script_provider.median_of(fn, repeats)})
    # The upstream's CPU per model call in this pass, by agents: what a smaller shape is judged by.
    upstream = {r["runs"]: r["cpu_per_call_ms"] for r in raw if r["shape"] == bench_script_provider.UPSTREAM_SHAPE}
    for r in raw:
        label, n, delay = r["shape"], r["runs"], r["delay_s"]
        group = f"provider script: {label}, {n:,} agents at {delay * 1e3:g} ms"
        spread = lambda key: tuple(r[f"{key}_spread"])  # noqa: E731
        drain = Row(group, "drain", "s", r["drain_s"], spread("drain_s"), r["ideal_s"], "ideal (longest run)")
        if delay >= 1.5:
            drain.target, drain.target_label = 1.1 * r["ideal_s"], "<= 1.1x ideal"
            drain.judge(lambda v, t: v <= t)
        elif n >= 1000 and not label.startswith(("engine", "upstream")):  # the cores this machine has, as the upstream used them
            drain.target, drain.target_label = UPSTREAM_DRAIN_S, f"<= {UPSTREAM_DRAIN_S:g} s (the upstream)"
            drain.judge(lambda v, t: v <= t)
        rows.append(drain)
        cpu = Row(group, "CPU per model call", "ms", r["cpu_per_call_ms"], spread("cpu_per_call_ms"),
                  None, f"{r['model_calls']:,.0f} calls")
        if label == "engine" and delay < 1.5 and n >= 1000:  # the workload: 1,000 agents at 50 ms
            cpu.target, cpu.target_label = 1.6, "<= 1.6 ms"
            cpu.judge(lambda v, t: v <= t)
        elif label == "engine" and delay < 1.5 and n in upstream:
            # A hundred agents give the loop and the writer fewer calls to share each wake-up with:
            # the same user time a call, more kernel time. Judged beside the upstream at that size.
            cpu.target, cpu.target_label = upstream[n], f"<= {upstream[n]:.2f} ms (the upstream)"
            cpu.judge(lambda v, t: v <= t)
        rows.append(cpu)
        if "script_cpu_per_call_ms" in r:
            rows.append(Row(group, "  of which the provider script", "ms", r["script_cpu_per_call_ms"],
                            spread("script_cpu_per_call_ms")))
            rows.append(Row(group, "  of which the engine", "ms", r["engine_cpu_per_call_ms"],
                            spread("engine_cpu_per_call_ms")))
        if "kernel_cpu_per_call_ms" in r:  # every thread's system time: the file system's, the sockets'
            rows.append(Row(group, "  of it in the kernel", "ms", r["kernel_cpu_per_call_ms"],
                            spread("kernel_cpu_per_call_ms")))
        if "switches_per_call" in r:
            rows.append(Row(group, "context switches per model call", "switches", r["switches_per_call"],
                            spread("switches_per_call")))
        flight = Row(group, "most calls in flight", "calls", r["peak_in_flight"], spread("peak_in_flight"), n,
                     "agents")
        if delay >= 1.5:
            flight.target, flight.target_label = float(n), f">= {n} (no ceiling)"
            flight.judge(lambda v, t: v >= t)
        rows.append(flight)
        if "per_run_kib" in r:
            rows.append(Row(group, "live memory per run", "KiB", r["per_run_kib"], spread("per_run_kib"),
                            r["base_kib"] / 1024, "MiB of the idle process"))
    handed = bench_script_provider.conversation_handover(HANDOVER_MESSAGES, 10 if quick else 40)
    raw.append({"shape": "a long conversation handed to the script", **handed})
    group = f"provider script: a {HANDOVER_MESSAGES}-message conversation handed to the script"
    rows.append(Row(group, "request built and converted, per call", "ms", handed["held_ms"],
                    tuple(handed["held_spread_ms"]), handed["whole_ms"], "converted whole each call"))
    counted = bench_script_provider.engine_instructions(*((30, 10) if quick else (60, 20)))
    if counted is not None:  # the engine's share without the machine's noise (needs valgrind)
        raw.append({"shape": "engine instructions, model in process", **counted})
        group = "provider script: the engine's own work (model answered in process, callgrind)"
        rows.append(Row(group, "instructions per run", "M", counted["instructions_per_run"] / 1e6))
        rows.append(Row(group, "instructions per model call", "M", counted["instructions_per_call"] / 1e6))
    return rows, raw


# ------------------------------------------------------------------------------------------------ cold starts
FIRST_CALL_CHILD = """
import sys, time
t0 = float(sys.argv[1])
from lev_nb.providers import mock
answer = mock.MockModel.complete
async def first(self, request):
    if not getattr(first, "seen", False):
        first.seen = True
        print(f"FIRST {time.time() - t0} {time.process_time()}", file=sys.stderr, flush=True)
    return await answer(self, request)
mock.MockModel.complete = first
from lev_nb.cli import main
sys.exit(main(sys.argv[2:]))
"""


def first_model_call(runs: int, home: str) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds from spawning ``lev run ... --model mock`` to its first model call."""
    env = bench_cli_startup._child_env(home)
    triage = str(ROOT / "blueprints" / "triage")
    cmd = ["run", triage, "--task", "R-1: the app crashes", "--model", "mock", "--quiet"]
    walls, cpus = [], []
    for i in range(runs + 1):  # the first is a warm-up
        start = time.time()
        proc = subprocess.run([sys.executable, "-c", FIRST_CALL_CHILD, repr(start), *cmd],
                              capture_output=True, text=True, env=env)
        line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("FIRST ")), None)
        if line is None:
            raise SystemExit(f"lev run made no model call: {proc.stderr}")
        if i:
            walls.append(float(line.split()[1]))
            cpus.append(float(line.split()[2]))
    return walls, cpus


def instructions(cmd: list[str], env: dict[str, str]) -> float | None:
    """Millions of instructions ``cmd`` executes, counted by valgrind's callgrind (None without
    valgrind). Unlike CPU time, the count does not move with the load of a shared machine, so it
    shows a start-up change of a few percent that the timings' spread hides."""
    if callgrind.valgrind() is None:
        return None
    _, counted = callgrind.run_counted(cmd, env=env)
    return counted / 1e6 if counted is not None else None


def timed_process(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of ``cmd`` as a whole process, after one warm-up."""
    walls, cpus = [], []
    for i in range(runs + 1):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {err}")
        if i:
            walls.append(wall)
            cpus.append(usage.ru_utime + usage.ru_stime)
    return walls, cpus


def cold_rows(runs: int) -> list[Row]:
    """import lev_nb, lev --help, lev validate, lev run to its first model call, first bp.run.

    The value judged is the process's CPU time (user + system): on a shared machine the wall time
    of a start-up mostly measures the other processes; on an idle one the two agree (the wall
    time is in the JSON as ``wall_ms``). Where valgrind is installed, each command's instruction
    count follows, which a busy machine does not move (:func:`instructions`)."""
    lev = str(Path(sys.executable).parent / "lev")
    triage = str(ROOT / "blueprints" / "triage")
    rows = []
    with scratch.folder() as home:
        env = bench_cli_startup._child_env(home)
        _, python = timed_process([sys.executable, "-c", "pass"], runs, env)
        base, _ = stats([t * 1e3 for t in python])
        commands = (
            ("import lev_nb", [sys.executable, "-c", "import lev_nb"], None),
            ("lev --help", [lev, "--help"], 20.0),
            ("lev validate blueprints/triage", [lev, "validate", triage], 100.0),
            # A first mock run in a new process, to its end (issue 29).
            ("lev run blueprints/triage --model mock", [lev, "run", triage, "--task", "R-1: the app crashes",
                                                        "--model", "mock", "--quiet"], 200.0),
        )
        for label, cmd, target in commands:
            walls, cpus = timed_process(cmd, runs, env)
            median, spread = stats([t * 1e3 for t in cpus])
            rows.append(Row("cold start (process CPU)", label, "ms", median, spread, base, "python -c pass", target,
                            f"< {target:g} ms" if target else "", wall_ms=statistics.median(walls) * 1e3).judge())
        counted_rows = []
        bare = instructions([sys.executable, "-c", "pass"], env)
        for label, cmd, _ in commands if bare is not None else ():
            counted = instructions(cmd, env)
            if counted is not None:
                counted_rows.append(Row("cold start (instructions, callgrind)", label, "M", counted, None, bare,
                                        "python -c pass"))
        walls, cpus = first_model_call(runs, home)
        median, spread = stats([t * 1e3 for t in cpus])
        rows.append(Row("cold start (process CPU)", "lev run: first model call", "ms", median, spread, base,
                        "python -c pass", 400.0, "< 400 ms", wall_ms=statistics.median(walls) * 1e3).judge())
    agent = str(ROOT / "blueprints" / "triage")
    firsts = [bench_first_run.one(bench_first_run.CHILD.format(agent=agent)) for _ in range(runs)]
    for key, label, target in (("import_load", "fresh process: import lev_nb + load", None),
                               ("first_run_returns", "fresh process: first bp.run returns", 100.0),
                               ("run_done", "fresh process: first mock run finishes", None)):
        median, spread = stats([f[f"{key}_cpu_s"] * 1e3 for f in firsts])
        rows.append(Row("cold start (process CPU)", label, "ms", median, spread, None, "", target,
                        f"< {target:g} ms" if target else "",
                        wall_ms=statistics.median(f[f"{key}_s"] for f in firsts) * 1e3).judge())
    schema = bench_schema_import.measure(runs)
    median, spread = stats([r["cpu_s"] * 1e3 for r in schema["lev_nb"]])
    base, _ = stats([r["cpu_s"] * 1e3 for r in schema["plain"]])
    rows.append(Row("cold start (process CPU)", "fresh process: first JSON Schema check", "ms", median, spread, base,
                    "import jsonschema + its format checker", bench_schema_import.TARGET_MS, "< 200 ms",
                    wall_ms=statistics.median(r["wall_s"] for r in schema["lev_nb"]) * 1e3).judge())
    return rows + counted_rows


def record_rows(runs: int, rounds: int) -> list[Row]:
    """A run record's writes (bench_record_writes): meta.json replaced on every turn by swapping with
    a kept sibling, next to renaming a new file over it; a record line encoded by orjson, next to
    json's C encoder. Both alternatives measured in the same run."""
    group = "run record writes"
    writes = bench_record_writes.meta_writes(runs, 6, rounds)
    swap, swap_spread = stats(writes["swap with a kept sibling"])
    rename, _ = stats(writes["rename over"])
    lines = bench_record_writes.line_encoding()
    return [
        Row(group, f"meta.json write ({runs:,} runs x 6 turns)", "us", swap, swap_spread, rename,
            "renamed over (before)"),
        Row(group, "a transcript line encoded", "us", lines["encode_line (orjson)"], None,
            lines["json's C encoder"], "json's C encoder (before)"),
    ]


def ps_rows(runs: int, repeats: int) -> list[Row]:
    """``lev ps`` (and --all, --json) over a store of ``runs`` fake records, two thirds of them
    abandoned (bench_ps.make_store); the baseline is ``lev ps`` over an empty store."""
    group = f"lev ps over {runs:,} runs"
    rows = []
    with scratch.folder() as tmp:
        empty, _ = bench_ps.time_ps(Path(tmp) / "empty", [], repeats)
        bench_ps.make_store(Path(tmp) / "full", runs)
        for args, target in (([], 2.0), (["--json"], None), (["--all"], None)):
            wall, lines = bench_ps.time_ps(Path(tmp) / "full", args, repeats)
            label = " ".join(["lev ps", *args]) + f" ({lines:,} lines)"
            rows.append(Row(group, label, "s", wall, None, empty, "empty store", target,
                            f"< {target:g} s" if target else "").judge())
    return rows


def runs_rows(runs: int, repeats: int) -> list[Row]:
    """``lev_nb.runs()`` over a store of ``runs`` fake records (bench_runs.measure), each figure
    next to the plain alternative (json-loading every meta.json), and ``lev ps`` over the same
    store in a fresh process."""
    group = f"run table over {runs:,} runs"
    targets = {"lev_nb.runs(), first call": 2.0, "lev_nb.runs(), again": 0.5, "lev_nb.runs(limit=50)": 0.5}
    rows = []
    with scratch.folder() as tmp:
        home = Path(tmp)
        bench_ps.make_store(home, runs)
        found = bench_runs.measure(home, repeats)
        plain = found.pop("plain json.load of every meta.json")[0]
        for label, (seconds, count) in found.items():
            target = targets.get(label)
            rows.append(Row(group, f"{label} ({count:,} rows)", "s", seconds, None, plain, "json.load every meta.json",
                            target, f"< {target:g} s" if target else "").judge())
        wall, lines = bench_ps.time_ps(home, [], repeats)
        rows.append(Row(group, f"lev ps, fresh process ({lines:,} lines)", "s", wall, None, plain,
                        "json.load every meta.json", 2.0, "< 2 s").judge())
    return rows


# ------------------------------------------------------------------------------------------------ scripts, outputs
def rhai_rows(quick: bool) -> list[Row]:
    """A Rhai function call with 1 KB, and a validator that parse_json's a 1 KB document."""
    budget, rounds = (0.2, 3) if quick else (1.0, 7)
    rhai, python = bench_rhai.rhai_cases(), bench_rhai.python_cases()
    rows = []
    for case, label in (("call_1kb", "Rhai call with 1 KB"), ("validator", "Rhai parse_json validator (1 KB)")):
        value = bench_rhai.time_per_call(rhai[case], budget, rounds)
        bare = bench_rhai.time_per_call(python[case], budget, rounds)
        rows.append(Row("scripts", label, "us", value, None, bare, "the same in Python"))
    return rows


def output_rows(repeats: int) -> list[Row]:
    """Final-output checks on a 100 KB answer: well-formedness per format, and a JSON Schema."""
    from lev_nb.engine.pipeline.outputs import check_schema, check_well_formed

    items = [{"id": i, "name": f"item-{i}", "score": i * 0.5, "tags": ["a", "b"]} for i in range(1400)]
    answers = {
        "json": json.dumps({"items": items}),
        "csv": "id,name,score\n" + "".join(f"{i},item-{i},{i * 0.5}\n" for i in range(4700)),
        "yaml": "items:\n" + "".join(f"  - id: {i}\n    name: item-{i}\n" for i in range(3300)),
        "xml": "<items>" + "".join(f'<item id="{i}">item-{i}</item>' for i in range(3900)) + "</items>",
    }
    schema = {"type": "object", "required": ["items"], "properties": {"items": {"type": "array", "items": {
        "type": "object", "required": ["id", "name"], "properties": {"id": {"type": "integer"}}}}}}
    rows = []
    baseline = _timed(lambda: json.loads(answers["json"]), repeats)[0]
    for fmt, text in answers.items():
        assert check_well_formed(fmt, text) is None, fmt
        median, spread = _timed(lambda f=fmt, t=text: check_well_formed(f, t), repeats)
        rows.append(Row("final output, 100 KB", f"{fmt} well-formed ({len(text) // 1024} KiB)", "ms", median, spread,
                        baseline, "json.loads of the JSON"))
    check_schema(schema, answers["json"])
    median, spread = _timed(lambda: check_schema(schema, answers["json"]), repeats)
    rows.append(Row("final output, 100 KB", "json + JSON Schema", "ms", median, spread, baseline, "json.loads of the JSON"))
    return rows


def _timed(fn: Callable[[], object], repeats: int) -> tuple[float, tuple[float, float]]:
    times = []
    for _ in range(max(3, repeats)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return stats(times)


def validate_rows(runs: int) -> list[Row]:
    """``lev validate`` on a generated 40-stage blueprint, whole process and in process."""
    lev = str(Path(sys.executable).parent / "lev")
    with scratch.folder() as tmp:
        folder = Path(tmp) / "bench-agent"
        folder.mkdir()
        (folder / "agent.leviath").write_text(bench_validate.generate_blueprint())
        base = bench_validate._time_command([sys.executable, "-c", "import lev_nb"], runs)
        whole = bench_validate._time_command([lev, "validate", str(folder)], runs)
        inproc, _ = bench_validate._time_in_process(folder, max(5, runs))
    b, _ = stats([t * 1e3 for t in base])
    m, s = stats([t * 1e3 for t in whole])
    i, si = stats([t * 1e3 for t in inproc])
    return [Row("validate, 40 stages", "lev validate (process)", "ms", m, s, b, "import lev_nb"),
            Row("validate, 40 stages", "load + validate (in process)", "ms", i, si)]


# ------------------------------------------------------------------------------------------------ processes
def _batch_span(home: str, summaries: list[Any]) -> tuple[float, float]:
    """(first run's start, last run's end) of a batch, in epoch seconds, read from its run records."""
    def when(stamp: str) -> float:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

    starts, ends = [], []
    for summary in summaries:
        meta = json.loads((Path(home) / "runs" / summary.run_id / "meta.json").read_text())
        starts.append(when(meta["started_at"]))
        ends.append(when(meta["updated_at"]))
    return min(starts), max(ends)


def _one_batch(bp: Any, tasks: int, processes: int, home: str) -> tuple[float, float]:
    """Run one batch into the run store ``home``; (seconds from the first run's start to the last
    run's end, worker start-up)."""
    import lev_nb

    called = time.time()
    out = lev_nb.run_many(bp, [f"fix {i}" for i in range(tasks)], model="mock", processes=processes,
                          home=home, show=False)
    assert all(s.ok for s in out), [s.error for s in out if not s.ok][:3]
    first, last = _batch_span(home, out)
    return last - first, first - called


def scaling_rows(tasks: int, pairs: int) -> list[Row]:
    """A CPU-bound batch (zero-latency mock) on 1 and on 2 worker processes (``lev_nb.run_many``).

    Each trial is timed from its first run's start to its last run's end, as its run records
    say (the workers' start-up, an import of lev_nb each, is reported beside it). The 1- and
    2-process trials alternate ``pairs`` times; the speed-up is the median of the pairs' ratios.
    The run store is on a RAM filesystem where there is one, so the figure is about CPU: on ext4
    the same batch's time depends on how many files the disk saw deleted in the last minutes (its
    inode allocator skips recently deleted inodes one by one), which moved the ratio between
    0.9x and 2.4x from one trial to the next. One pair on disk is shown beside it for information.
    """
    import lev_nb

    bp = lev_nb.load(ROOT / "blueprints" / "code-fixer")
    ram = scratch.ram_available()
    walls: dict[int, list[float]] = {1: [], 2: []}
    startups: dict[int, list[float]] = {1: [], 2: []}
    with scratch.folder(ram=ram) as in_ram, scratch.folder() as on_disk:
        for pair in range(pairs):
            for processes in (1, 2):
                wall, startup = _one_batch(bp, tasks, processes, f"{in_ram}/{pair}-{processes}")
                walls[processes].append(wall)
                startups[processes].append(startup)
        disk = {processes: _one_batch(bp, tasks, processes, f"{on_disk}/{processes}")[0] for processes in (1, 2)}
    ratios = [one / two for one, two in zip(walls[1], walls[2])]
    speedup, spread = stats(ratios)
    where = "run store in RAM" if ram else "run store on disk"
    group = f"batch of {tasks} (code-fixer, mock, {where}, {pairs} pairs)"
    return [Row(group, "2 processes: speed-up", "x", speedup, spread, statistics.median(walls[1]),
                "s on 1 process", 1.8, ">= 1.8x").judge(lambda v, t: v >= t),
            Row(group, "worker start-up (2 processes)", "s", statistics.median(startups[2]), None,
                statistics.median(startups[1]), "s for 1 process"),
            Row(group, "run store on disk: speed-up (1 pair)", "x", disk[1] / disk[2], None, disk[1],
                "s on 1 process")]


# ------------------------------------------------------------------------------------------------ the runner
def machine() -> dict[str, Any]:
    """A description of this machine: CPUs, memory, Python, platform."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpus": os.cpu_count(), "cpu_model": model, "memory_bytes": memory,
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            # Other work on the machine while the benchmarks ran (1, 5, 15 minutes), read at the end.
            "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None}


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return f"{text} {unit}".strip()


def print_table(rows: list[Row]) -> None:
    """One table: figure, value (median) and spread, baseline, target, met."""
    head = f"{'figure':<46}{'value':>14}{'spread':>22}{'baseline':>14}  {'(baseline is)':<28}{'target':>12}  met"
    print(head)
    print("-" * len(head))
    group = None
    for r in rows:
        if r.group != group:
            group = r.group
            print(f"[{group}]")
        spread = f"{fmt(r.spread[0])}-{fmt(r.spread[1])}" if r.spread else "-"
        verdict = "" if r.met is None else ("met" if r.met else "NOT MET")
        print(f"  {r.figure:<44}{fmt(r.value, r.unit):>14}{spread:>22}{fmt(r.baseline):>14}  "
              f"{r.baseline_label[:28]:<28}{r.target_label:>12}  {verdict}")


def _merged(path: Path, rows: list[Row]) -> list[Row]:
    """The rows of the results file at ``path``, with those measured again replaced by ``rows``."""
    try:
        old = [Row(**row) for row in json.loads(path.read_text())["rows"]]
    except (OSError, ValueError, KeyError, TypeError):
        return rows
    fresh = {(r.group, r.figure) for r in rows}
    return [r for r in old if (r.group, r.figure) not in fresh] + rows


def _merged_raw(path: Path, raw: dict[str, Any]) -> dict[str, Any]:
    """The raw data of the results file at ``path``, with what was measured again replaced by ``raw``
    (the sections' run times merged)."""
    try:
        old = json.loads(path.read_text())["raw"]
    except (OSError, ValueError, KeyError, TypeError):
        return raw
    if not isinstance(old, dict):
        return raw
    merged = {**old, **{k: v for k, v in raw.items() if k != "seconds"}}
    merged["seconds"] = {**old.get("seconds", {}), **raw.get("seconds", {})}
    return merged


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the table, write the JSON; the exit status is 0 either way."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a CI-sized pass: fewer repeats, 100 and 1,000 runs")
    parser.add_argument("--big", action="store_true", help="add the 1,000-agent provider-script shapes")
    parser.add_argument("--out", default=str(HERE / "results"), metavar="DIR", help="where the JSON goes")
    parser.add_argument("--only", default=None, help="comma-separated groups: engine,concurrent,cold,rhai,records,"
                                                     "outputs,validate,scaling,ps,tracing,runs,script")
    args = parser.parse_args(argv)
    quick = args.quick
    repeats = 3 if quick else 7
    wanted = set(args.only.split(",")) if args.only else None
    started = time.perf_counter()
    rows: list[Row] = []
    raw: dict[str, Any] = {}

    def section(name: str, fn: Callable[[], list[Row]]) -> None:
        if wanted is not None and name not in wanted:
            return
        t = time.perf_counter()
        print(f"... {name}", file=sys.stderr, flush=True)
        rows.extend(fn())
        raw.setdefault("seconds", {})[name] = round(time.perf_counter() - t, 2)

    section("engine", lambda: engine_rows(repeats))
    section("tracing", lambda: tracing_rows(repeats))

    def concurrent() -> list[Row]:
        sizes = [100, 1000] if quick else [100, 1000, 10_000]
        found, raw["concurrent"] = concurrent_rows(sizes, 0.05, bench_engine.POOL_WIDTH)
        if quick:
            slow, more = concurrent_rows([1000], 1.5, bench_engine.POOL_WIDTH)
        else:
            slow, more = concurrent_rows([1000, 10_000], 1.5, bench_engine.POOL_WIDTH)
        raw["concurrent"] += more
        return found + slow

    section("concurrent", concurrent)

    def script() -> list[Row]:
        found, raw["script"] = script_provider_rows(quick, args.big)
        return found

    section("script", script)
    section("cold", lambda: cold_rows(3 if quick else 10))
    section("rhai", lambda: rhai_rows(quick))
    section("outputs", lambda: output_rows(repeats))
    section("validate", lambda: validate_rows(3 if quick else 7))
    section("scaling", lambda: scaling_rows(300 if quick else 1200, 1 if quick else 3))
    section("records", lambda: record_rows(200 if quick else 1000, 3))
    section("ps", lambda: ps_rows(2000 if quick else 15_000, 1 if quick else 3))
    section("runs", lambda: runs_rows(2000 if quick else 10_000, 1 if quick else 3))

    print_table(rows)
    elapsed = time.perf_counter() - started
    now = datetime.datetime.now(datetime.timezone.utc)
    host = socket.gethostname()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{now:%Y-%m-%d}-{host}.json"
    if wanted is not None and path.exists():
        rows = _merged(path, rows)  # --only re-measures its groups in today's file, keeping the rest
        raw = _merged_raw(path, raw)
    path.write_text(json.dumps({
        "benchmark": "lev_nb", "mode": "quick" if quick else "full", "when": now.isoformat(timespec="seconds"),
        "seconds": round(elapsed, 1), "machine": machine(), "rows": [asdict(r) for r in rows], "raw": raw,
    }, indent=2) + "\n")
    targets = [r for r in rows if r.met is not None]
    print(f"\n{sum(r.met for r in targets if r.met)}/{len(targets)} targets met in {elapsed:.0f} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

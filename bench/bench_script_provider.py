"""The provider-script workload: many agents whose every model call goes through a Rhai provider
script to a model server that answers after a fixed delay (issue 29).

The parts are ours: the provider script bench/providers/benchmock.rhai (OpenAI-shaped: it builds a
Chat Completions body, POSTs it, reads the answer back), the model server bench/latency_server.py
(127.0.0.1, a configurable delay, counting the calls it holds at once) and four bench agents in
bench/agents, mixed 30/30/20/20:

    tool-user    1 stage, 3 tool turns   4 model calls      (30%)
    one-shot     1 stage, text answer    1 model call       (30%)
    two-stage    2 stages                3 model calls      (20%)
    three-stage  3 stages                6 model calls      (20%)

Shapes, each in a fresh process:

- ``engine``: N runs started at once on one engine loop (``start_run``) in one process: drain
  time (first start to last end), CPU per model call split into the provider scripts' own
  evaluation (the Rhai evaluation threads) and the rest (the engine loop, which also builds each
  request map, serves the scripts' host calls and does their HTTP; the caller's thread starting
  the runs; the record writer), the most calls the server held at once, live memory per run.
- ``engine, store in RAM``: the same, measured right after it, with the run store in RAM
  (``/dev/shm``): the side-by-side baseline that shows what the disk costs. The kernel column is
  every thread's system time per call; on this machine's disk the file system's share moves with
  what the disk did in the minutes before (deleting thousands of files doubles it for a while).
- ``cli``: the four agents' shares as four ``lev run AGENT --count K [--workers W]`` processes
  started together; drain is the wall time to the last exit (process start-up included), CPU
  that of every process.
- ``run_many``: the same shares through ``lev_nb.run_many`` (one call per agent, side by side, each
  on ``W`` worker processes); drain and CPU as for ``cli``.

The ceiling check: at 1.5 s a call, 100 agents in flight at once must have 100 calls in flight
(the only limit being ``max_concurrent_inferences``), and drain near the ideal.

The engine's own work, without the machine's noise: the same mix with the model answered in the
process (the latency server's answers, no provider script, no network, no wait), counted in
instructions by valgrind's callgrind (:func:`engine_instructions`): per run, the difference between
a process making many runs and one making few, so start-up and first-use costs cancel out.

    python bench/bench_script_provider.py                  # quick: 100 agents at 50 ms and at 1.5 s
    python bench/bench_script_provider.py --big            # adds 1,000 agents at 50 ms (engine, cli, run_many)
    python bench/bench_script_provider.py --runs 1000 --shape cli --workers 2   # lev run --count --workers 2
    python bench/bench_script_provider.py --runs 1000 --delay 0.05 --shape engine
    python bench/bench_script_provider.py --runs 1000 --ram    # the run store in RAM
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import callgrind
import scratch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "script_provider.json"
SCRIPT = HERE / "providers" / "benchmock.rhai"
AGENTS = HERE / "agents"
# (agent folder, weight out of 10, model calls of one run)
MIX = (("tool-user", 3, 4), ("one-shot", 3, 1), ("two-stage", 2, 3), ("three-stage", 2, 6))
LONGEST = max(calls for _, _, calls in MIX)
POOL = 4096  # [limits] max_concurrent_inferences: wide enough that the pool is never the limit


# ------------------------------------------------------------------------------------------ the server
@contextlib.contextmanager
def latency_server(delay: float) -> Iterator[int]:
    """bench/latency_server.py in its own process; yields its port."""
    proc = subprocess.Popen([sys.executable, str(HERE / "latency_server.py"), "--delay", str(delay)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(10)


def server_call(port: int, path: str) -> dict[str, Any]:
    """GET /stats or POST /reset on the server."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST" if path == "/reset" else "GET", path)
    data = json.loads(conn.getresponse().read())
    conn.close()
    return data


def write_home(home: str, port: int, pool: int = POOL) -> None:
    """A run store whose config.toml serves ``benchmock`` with the bench script and server."""
    Path(home, "config.toml").write_text(
        "[model_providers.benchmock]\n"
        f"script = {json.dumps(str(SCRIPT))}\n"
        f"base_url = \"http://127.0.0.1:{port}/v1\"\n"
        "[security]\nallow_local_network = true\n"
        f"[limits]\nmax_concurrent_inferences = {pool}\n"
        # The workload is the agents' own calls: no extra call per run for a generated title.
        "[title]\nenabled = false\n")


def shares(n: int) -> list[tuple[str, int]]:
    """How many of ``n`` runs each agent gets (30/30/20/20, the rest to the first)."""
    counts = [(name, n * weight // 10) for name, weight, _ in MIX]
    counts[0] = (counts[0][0], counts[0][1] + n - sum(c for _, c in counts))
    return counts


def expected_calls(n: int) -> int:
    """Model calls ``n`` runs of the mix make."""
    per = {name: calls for name, _, calls in MIX}
    return sum(per[name] * count for name, count in shares(n))


# ----------------------------------------------------------------------------- shape: one engine loop
def child_engine(n: int, home: str) -> dict[str, Any]:
    """In a fresh process: n runs of the mix at once on the engine loop; the figures as a dict."""
    import gc

    import lev_nb
    from lev_nb.blueprint import load
    from lev_nb.engine.api import start_run
    from lev_nb.engine.loop import engine_loop

    sys.path.insert(0, str(HERE))
    from bench_engine import live_memory_kib

    os.environ["LEV_HOME"] = home
    lev_nb.configure(max_concurrent_inferences=POOL)
    # Each agent loaded once and started many times, as `lev run --count` and run_many do.
    loaded = {name: load(AGENTS / name) for name, _ in shares(n)}
    blueprints = [loaded[name] for name, count in shares(n) for _ in range(count)]
    order = [blueprints[(i * 7919) % n] for i in range(n)]  # interleaved, not agent by agent
    engine_loop()
    gc.collect()
    base = live_memory_kib()
    switches0 = _context_switches()
    threads0 = _thread_cpu()
    times0 = os.times()
    cpu0 = time.process_time()
    start = time.perf_counter()
    runs = [start_run(bp, task=f"item {i}: summarise the report", home=home) for i, bp in enumerate(order)]
    peak = 0
    watching = time.thread_time()  # this thread's sampling is the bench's own CPU, not lev_nb's
    watching_kernel = _thread_kernel()
    while not all(r.done() for r in runs):
        peak = max(peak, live_memory_kib())
        time.sleep(0.02)
    drain = time.perf_counter() - start
    own = time.thread_time() - watching
    cpu = time.process_time() - cpu0 - own
    # os.times counts in clock ticks (10 ms), the sampler's share in microseconds: a short pass can
    # come out a tick below zero, which means "too little to see", not negative time.
    kernel = max(0.0, os.times().system - times0.system - (_thread_kernel() - watching_kernel))
    threads1 = _thread_cpu()
    # The Rhai evaluation threads' share (the scripts themselves): what the threads still alive
    # and not evaluating (the caller's, the engine loop's, the record writer's) did not spend.
    # Evaluation threads past the idle pool end with their runs, so they are counted this way.
    python = sum(spent - threads0.get(tid, ("", 0.0))[1] for tid, (name, spent) in threads1.items()
                 if name != "lev-rhai") - own
    script_cpu = max(0.0, cpu - python)
    switches = _context_switches() - switches0
    statuses: dict[str, int] = {}
    for r in runs:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {"drain_s": drain, "cpu_s": cpu, "kernel_cpu_s": kernel, "script_cpu_s": script_cpu, "statuses": statuses,
            "peak_live_kib": peak, "base_kib": base, "per_run_kib": (peak - base) / n,
            "context_switches": switches}


def _thread_kernel() -> float:
    """System CPU seconds of the calling thread (Linux): reading /proc for the memory samples
    costs kernel time that is the bench's, not lev_nb's."""
    import resource

    return resource.getrusage(resource.RUSAGE_THREAD).ru_stime


def _thread_cpu() -> dict[int, tuple[str, float]]:
    """Each live thread of this process: its name and the CPU seconds it has used (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return found


def _context_switches() -> int:
    """Context switches of this process so far, every thread's (ended ones too): the hand-offs
    between the engine, the call threads and the record writer, which a loaded machine moves far
    less than it moves CPU time. The bench's own sampling thread adds about 50 a second."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def child_in_process(n: int, home: str) -> None:
    """In a fresh process: n runs of the mix, one after another's start as in ``child_engine``,
    with each model call answered in the process as bench/latency_server.py answers it."""
    import lev_nb
    from lev_nb.blueprint import load
    from lev_nb.engine.api import start_run
    from lev_nb.messages import ModelResponse, ToolCall, ToolResultBlock
    from lev_nb.providers import rhai_provider

    sys.path.insert(0, str(HERE))
    from latency_server import reply

    async def complete(self: Any, request: Any) -> Any:
        # What reply() reads of a chat request: the model, this stage's tool results, the tools offered.
        results = [{"role": "tool", "tool_call_id": block.tool_use_id} for message in request.messages
                   if not isinstance(message.content, str)
                   for block in message.content if isinstance(block, ToolResultBlock)]
        answer = reply({"model": request.model or self.model, "messages": results,
                        "tools": [{"function": {"name": tool.name}} for tool in request.tools]})
        message = answer["choices"][0]["message"]
        calls = [ToolCall(id=c["id"], name=c["function"]["name"], arguments=json.loads(c["function"]["arguments"]))
                 for c in message.get("tool_calls") or []]
        return ModelResponse(text=message.get("content") or "", tool_calls=calls,
                             finish_reason="tool_use" if calls else "complete")

    rhai_provider.RhaiProvider.complete = complete  # type: ignore[method-assign]
    os.environ["LEV_HOME"] = home
    lev_nb.configure(max_concurrent_inferences=POOL)
    loaded = {name: load(AGENTS / name) for name, _ in shares(n)}
    blueprints = [loaded[name] for name, count in shares(n) for _ in range(count)]
    runs = [start_run(blueprints[(i * 7919) % n], task=f"item {i}: summarise the report", home=home)
            for i in range(n)]
    for run in runs:
        run.wait()
    failed = [run.status for run in runs if run.status != "complete"]
    if failed:
        raise SystemExit(f"runs did not complete: {failed[:3]}")


def conversation_handover(messages: int, repeats: int) -> dict[str, Any]:
    """Milliseconds to build a provider script's request map for a long conversation and hand it to
    a script, per call: each block converted once and kept (what a provider does) against the
    whole conversation converted on every call (the ``fresh`` median beside it, same pass)."""
    from lev_nb.messages import Message, ModelRequest, TextBlock, ToolResultBlock, ToolUseBlock
    from lev_nb.providers.rhai_provider import request_map, shared_engine

    history = [Message("user", "Begin.")]
    for i in range((messages - 1) // 2):
        history.append(Message("assistant", [TextBlock("Reading the next file. " * 8),
                                             ToolUseBlock(f"call-{i}", "read_file", {"path": f"src/part_{i}.py"})]))
        history.append(Message("user", [ToolResultBlock(f"call-{i}", "value = compute(value)\n" * 40)]))
    request = ModelRequest(provider="bench", model="m", system=["You read code."], messages=history)
    engine = shared_engine(None)
    ast = engine.compile("fn inference(request) { request.messages.len() }")
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for held in (False, True):
            start = time.perf_counter()
            engine.call(ast, "inference", request_map(request, held=held))
            times[held].append((time.perf_counter() - start) * 1e3)
    return {"messages": len(history), "whole_ms": statistics.median(times[False]),
            "held_ms": statistics.median(times[True]),
            "held_spread_ms": [min(times[True]), max(times[True])]}


def engine_instructions(many: int = 60, few: int = 20) -> dict[str, Any] | None:
    """Instructions of the engine's own work per run and per model call (see the module docstring):
    ``(I(many) - I(few)) / (many - few)``. None without valgrind."""
    if callgrind.valgrind() is None:
        return None
    counts = {}
    for n in (few, many):
        with scratch.folder() as home:
            write_home(home, 9)  # the port is never used: no call leaves the process
            proc, counted = callgrind.run_counted([sys.executable, __file__, "--child-in-process", str(n),
                                                   "--home", home], cwd=str(ROOT), env=_env(home))
            if proc.returncode or counted is None:
                raise SystemExit(f"bench child failed: {proc.stderr[-3000:]}")
            counts[n] = counted
    per_run = (counts[many] - counts[few]) / (many - few)
    return {"instructions_per_run": per_run, "instructions_per_call": per_run * many / expected_calls(many),
            "runs": [few, many], "instructions": [counts[few], counts[many]]}


def run_engine(n: int, delay: float, ram: bool = False) -> dict[str, Any]:
    """The ``engine`` shape once: a fresh process against a fresh server (``ram``: its run store
    in RAM)."""
    with latency_server(delay) as port, scratch.folder(ram=ram) as home:
        write_home(home, port)
        out = subprocess.run([sys.executable, __file__, "--child", str(n), "--home", home],
                             capture_output=True, text=True, cwd=ROOT, env=_env(home))
        if out.returncode:
            raise SystemExit(f"bench child failed: {out.stderr[-3000:]}")
        found = json.loads(out.stdout.strip().splitlines()[-1])
        stats = server_call(port, "/stats")
    return _finish(found, n, delay, stats)


def _finish(found: dict[str, Any], n: int, delay: float, stats: dict[str, Any]) -> dict[str, Any]:
    calls = stats["calls"]
    found.update(runs=n, delay_s=delay, model_calls=calls, peak_in_flight=stats["peak"],
                 cpu_per_call_ms=found["cpu_s"] / max(1, calls) * 1e3,
                 ideal_s=LONGEST * delay, expected_calls=expected_calls(n))
    if "script_cpu_s" in found:
        found["script_cpu_per_call_ms"] = found["script_cpu_s"] / max(1, calls) * 1e3
        found["engine_cpu_per_call_ms"] = found["cpu_per_call_ms"] - found["script_cpu_per_call_ms"]
    if "kernel_cpu_s" in found:
        found["kernel_cpu_per_call_ms"] = found["kernel_cpu_s"] / max(1, calls) * 1e3
    if "context_switches" in found:
        found["switches_per_call"] = found["context_switches"] / max(1, calls)
    return found


def _env(home: str) -> dict[str, str]:
    env = dict(os.environ, LEV_HOME=home, PYTHONPATH=str(ROOT))
    env.pop("LEV_CONFIG", None)
    # Bytecode caches on, as in an installed lev_nb: with them off (some machines set this), every
    # module a run imports on first use was compiled again inside the measured window.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cache_bytecode() -> None:
    """Compile lev_nb's modules into their bytecode caches once, before any shape is measured (what
    installing the package does), so no child compiles what its runs import."""
    import compileall

    compileall.compile_dir(str(ROOT / "lev_nb"), quiet=1)


# ------------------------------------------------------------------------- shapes: processes
def run_cli(n: int, delay: float, workers: int | None) -> dict[str, Any]:
    """The four agents' shares as ``lev run AGENT --count K [--workers W]``, started together."""
    lev = str(Path(sys.executable).parent / "lev")
    with latency_server(delay) as port, scratch.folder() as home:
        write_home(home, port)
        start = time.perf_counter()
        procs = []
        for name, count in shares(n):
            cmd = [lev, "run", str(AGENTS / name), "--task", "summarise the report", "--count", str(count), "--quiet"]
            if workers:
                cmd += ["--workers", str(workers)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(home)))
        cpu = _wait_all(procs, "lev run")
        drain = time.perf_counter() - start
        stats = server_call(port, "/stats")
    return _finish({"drain_s": drain, "cpu_s": cpu, "workers": workers or 0}, n, delay, stats)


def _wait_all(procs: list[subprocess.Popen[bytes]], what: str) -> float:
    """Wait for every process; the CPU seconds they used (SystemExit with its stderr if one failed)."""
    cpu = 0.0
    for proc in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{what} failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    return cpu


def upstream_binary() -> str | None:
    """The upstream runtime's ``lev`` (built from GEMISIS/leviath), when ``LEV_UPSTREAM`` names one:
    the baseline the issue's targets were set against, measured on this workload in the same run."""
    path = os.environ.get("LEV_UPSTREAM", "")
    return path if path and os.access(path, os.X_OK) else None


def _process_cpu(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_upstream(n: int, delay: float) -> dict[str, Any]:
    """:func:`upstream_once`, once more with a fresh daemon when the first one failed: the upstream's
    daemon now and then stops serving while a batch is being spawned ("daemon is shutting down",
    seen at 1,000 agents), which says nothing about the workload."""
    try:
        return upstream_once(n, delay)
    except SystemExit as failure:
        print(f"the upstream's pass failed, measuring it again with a fresh daemon: {failure}", file=sys.stderr)
        return upstream_once(n, delay)


def upstream_once(n: int, delay: float) -> dict[str, Any]:
    """The four agents' shares as the upstream's ``lev run AGENT --count K`` into its daemon (one
    process, started here in the foreground), with this workload's provider script and server. Its
    data root is ``$LEVIATH_HOME/.leviath``; it refuses a task for an agent with no region seeded
    from one, so these agents get an empty task (a few tokens less to send). CPU: the daemon's,
    read from /proc when the last call has been answered, plus the four clients'."""
    lev = upstream_binary()
    assert lev is not None
    with latency_server(delay) as port, scratch.folder() as home:
        data = Path(home, ".leviath")
        (data / "providers").mkdir(parents=True)
        shutil.copy(SCRIPT, data / "providers" / "benchmock.rhai")
        (data / "config.toml").write_text(
            f"[model_providers.benchmock]\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"
            f"[security]\nallow_local_network = true\n[limits]\nmax_concurrent_inferences = {POOL}\n")
        env = dict(os.environ, LEVIATH_HOME=home)
        daemon = subprocess.Popen([lev, "daemon"], env=env, cwd=home, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):  # until it answers on its control socket
                status = subprocess.run([lev, "daemon", "status"], env=env, cwd=home, capture_output=True, text=True)
                if "running" in status.stdout:
                    break
                time.sleep(0.1)
            cpu0 = _process_cpu(daemon.pid)
            before = server_call(port, "/stats")["calls"]
            start = time.perf_counter()
            clients = []
            for name, count in shares(n):
                clients.append(subprocess.Popen(
                    [lev, "run", str(AGENTS / name), "--task", "", "--count", str(count), "--yolo", "--json"],
                    env=env, cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            client_cpu = _wait_all(clients, "the upstream's lev run")
            expected = expected_calls(n)
            while server_call(port, "/stats")["calls"] - before < expected:
                if time.perf_counter() - start > 600:
                    raise SystemExit("the upstream's runs did not make their calls within 10 minutes")
                time.sleep(0.02)
            drain = time.perf_counter() - start
            cpu = _process_cpu(daemon.pid) - cpu0 + client_cpu
            stats = server_call(port, "/stats")
        finally:
            daemon.terminate()
            daemon.wait(30)
    return _finish({"drain_s": drain, "cpu_s": cpu}, n, delay, stats)


# The upstream's shape, in the table when LEV_UPSTREAM names its binary.
UPSTREAM_SHAPE = "upstream (4 x lev run --count, its daemon)"


RUN_MANY_CHILD = """
import json, sys, threading
import lev_nb
agents, home, processes = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
failed = []
def one(path, count):
    out = lev_nb.run_many(path, ["summarise the report"] * count, processes=processes, concurrency=count,
                          home=home, show=False)
    failed.extend(s.error for s in out if not s.ok)
threads = [threading.Thread(target=one, args=(path, count)) for path, count in agents]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"failed": failed[:3]}))
"""


def run_many_shape(n: int, delay: float, processes: int) -> dict[str, Any]:
    """The four agents' shares through ``lev_nb.run_many`` (one call per agent, side by side)."""
    agents = [(str(AGENTS / name), count) for name, count in shares(n)]
    with latency_server(delay) as port, scratch.folder() as home:
        write_home(home, port)
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", RUN_MANY_CHILD, json.dumps(agents), home, str(processes)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(home), cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        drain = time.perf_counter() - start
        out = proc.stdout.read().decode() if proc.stdout else ""
        if os.waitstatus_to_exitcode(status) != 0 or json.loads(out.strip().splitlines()[-1])["failed"]:
            raise SystemExit(f"run_many failed: {out[-1000:]} {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        stats = server_call(port, "/stats")
    return _finish({"drain_s": drain, "cpu_s": usage.ru_utime + usage.ru_stime, "processes": processes},
                   n, delay, stats)


# ------------------------------------------------------------------------------------------- runner
def median_of(fn: Any, repeats: int) -> dict[str, Any]:
    """``fn()`` ``repeats`` times: the median of every number, the spread of each, the samples."""
    samples = [fn() for _ in range(repeats)]
    out: dict[str, Any] = dict(samples[-1])
    for key, value in samples[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values = [s[key] for s in samples]
            out[key] = statistics.median(values)
            out[f"{key}_spread"] = [min(values), max(values)]
    out["repeats"] = repeats
    return out


# The engine shape with its run store in RAM, measured right after the one on disk: the same work
# without the file system's, whose cost on this machine's disk moves with what it did lately.
RAM_SHAPE = "engine, store in RAM"


def shapes(big: bool) -> list[tuple[str, int, float, Any]]:
    """(label, runs, delay, what to run) for the default pass or the big one."""
    todo: list[tuple[str, int, float, Any]] = [
        ("engine", 100, 0.05, lambda: run_engine(100, 0.05)),
        *([(RAM_SHAPE, 100, 0.05, lambda: run_engine(100, 0.05, ram=True))] if scratch.ram_available() else []),
        ("engine", 100, 1.5, lambda: run_engine(100, 1.5)),
        ("cli (4 x lev run --count)", 100, 0.05, lambda: run_cli(100, 0.05, None)),
    ]
    if big:
        todo += [
            ("engine", 1000, 0.05, lambda: run_engine(1000, 0.05)),
            *([(RAM_SHAPE, 1000, 0.05, lambda: run_engine(1000, 0.05, ram=True))] if scratch.ram_available() else []),
            ("cli (4 x lev run --count)", 1000, 0.05, lambda: run_cli(1000, 0.05, None)),
            ("run_many (4 x 1 process)", 1000, 0.05, lambda: run_many_shape(1000, 0.05, 1)),
            ("run_many (4 x 2 processes)", 1000, 0.05, lambda: run_many_shape(1000, 0.05, 2)),
        ]
    if upstream_binary() is not None:
        todo += [(UPSTREAM_SHAPE, n, 0.05, lambda n=n: run_upstream(n, 0.05)) for n in ((100, 1000) if big else (100,))]
    return todo


def main() -> None:
    """Measure, print the table, save the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", action="store_true", help="add the 1,000-agent shapes")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per shape (median taken)")
    parser.add_argument("--runs", type=int, default=0, help="one engine shape of this many agents instead")
    parser.add_argument("--delay", type=float, default=0.05, help="with --runs: seconds per model call")
    parser.add_argument("--shape", default="engine", choices=("engine", "cli", "run_many", "upstream"),
                        help="with --runs (upstream: the binary LEV_UPSTREAM names)")
    parser.add_argument("--workers", type=int, default=0, help="with --runs and cli/run_many: worker processes")
    parser.add_argument("--ram", action="store_true", help="with --runs and engine: the run store in RAM")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--child-in-process", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--home", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child_engine(args.child, args.home)))
        return
    if args.child_in_process:
        child_in_process(args.child_in_process, args.home)
        return
    if args.runs:
        n, d, w = args.runs, args.delay, args.workers
        fn = {"engine": lambda: run_engine(n, d, args.ram), "cli": lambda: run_cli(n, d, w or None),
              "run_many": lambda: run_many_shape(n, d, w or 1), "upstream": lambda: run_upstream(n, d)}[args.shape]
        if args.shape == "upstream" and upstream_binary() is None:
            raise SystemExit("--shape upstream: set LEV_UPSTREAM to the upstream's lev binary")
        todo = [(args.shape, n, d, fn)]
    else:
        todo = shapes(args.big)
    results = []
    cache_bytecode()
    for label, n, delay, fn in todo:
        print(f"... {label}: {n} agents at {delay * 1e3:g} ms", file=sys.stderr, flush=True)
        results.append({"shape": label, **median_of(fn, args.repeats)})
    print_table(results)
    save(results)


def save(results: list[dict[str, Any]]) -> None:
    """bench/results/script_provider.json, with the machine's description."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench.__main__ import machine

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine(), "results": results}, indent=2) + "\n")
    print(f"\nsaved {RESULTS.relative_to(ROOT)}")


def print_table(results: list[dict[str, Any]]) -> None:
    """One line per shape."""
    print(f"{'shape':<22}{'agents':>7}{'delay':>8}{'drain s':>9}{'ideal':>7}{'CPU/call ms':>12}{'script':>8}"
          f"{'engine':>8}{'kernel':>8}{'switches':>9}{'in flight':>10}{'KiB/run':>9}  calls")
    for r in results:
        script = f"{r['script_cpu_per_call_ms']:.2f}" if "script_cpu_per_call_ms" in r else "-"
        engine = f"{r['engine_cpu_per_call_ms']:.2f}" if "engine_cpu_per_call_ms" in r else "-"
        kib = f"{r['per_run_kib']:.0f}" if "per_run_kib" in r else "-"
        kernel = f"{r['kernel_cpu_per_call_ms']:.2f}" if "kernel_cpu_per_call_ms" in r else "-"
        switches = f"{r['switches_per_call']:.1f}" if "switches_per_call" in r else "-"
        print(f"{r['shape']:<22}{r['runs']:>7}{r['delay_s'] * 1e3:>6g}ms{r['drain_s']:>9.2f}{r['ideal_s']:>7.2f}"
              f"{r['cpu_per_call_ms']:>12.2f}{script:>8}{engine:>8}{kernel:>8}{switches:>9}{r['peak_in_flight']:>10}{kib:>9}"
              f"  {r['model_calls']}/{r['expected_calls']}")


if __name__ == "__main__":
    main()

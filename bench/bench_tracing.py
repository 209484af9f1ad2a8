"""Tracing benchmark: what OpenTelemetry tracing (lev_nb.observability, issue 21) adds per model
call and per tool call.

Not a test. Prints a table and writes bench/results/tracing.json. Run it with:

    .venv/bin/python bench/bench_tracing.py [--quick]

The engine benchmark's workload (bench_engine.STAGE_BLUEPRINT on a zero-latency ScriptedModel: K
turns of one model call and its tool calls) runs in three modes, each measured as the process's
CPU time from the start of a run to its record and its spans flushed:

* ``off`` — no tracing configured (what every run pays: one look at the configuration);
* ``spans`` — spans made and handed to a batch processor whose exporter drops them (the cost of
  turning events into spans);
* ``otlp`` — the SDK's OTLP/HTTP exporter behind a batch processor, sending to a collector
  stand-in in another process (span making, protobuf encoding and the HTTP posts).

As in ``python -m bench``, a turn with one tool call and a turn with ten give the cost per model
call and per tool call apart: per tool = (ten-call turn - one-call turn) / 9, per model call =
one-call turn - per tool.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "tracing.json"
for entry in (str(ROOT), str(ROOT / "bench")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from bench_engine import STAGE_BLUEPRINT, flush_records  # noqa: E402
import scratch  # noqa: E402

MODES = ("off", "spans", "otlp")

# A collector stand-in in its own process, so its CPU is not counted as the exporter's.
COLLECTOR = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _provider(mode: str, endpoint: str) -> Any:
    """The TracerProvider of a mode (None: off)."""
    if mode == "off":
        return None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider(shutdown_on_exit=False)
    if mode == "spans":
        exporter: Any = Drop()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=endpoint + "/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def per_turn(mode: str, turns: int, calls_per_turn: int, repeats: int, endpoint: str) -> list[float]:
    """CPU seconds per turn of each repeat, spans flushed included."""
    from lev_nb.blueprint import load
    from lev_nb.engine.api import start_run
    from lev_nb.engine.pipeline.inference import RetryPolicy
    from lev_nb.observability import use_tracer_provider
    from lev_nb.providers import ScriptedModel

    call = {"name": "current_time", "arguments": {}}
    steps = [{"text": "", "tool_calls": [dict(call) for _ in range(calls_per_turn)]} for _ in range(turns)]
    steps.append({"text": "done"})
    bp = load(STAGE_BLUEPRINT)
    provider = _provider(mode, endpoint)
    use_tracer_provider(provider)
    times = []
    try:
        with scratch.folder() as home:
            for _ in range(repeats):
                start = time.process_time()
                run = start_run(bp, task="bench", model=ScriptedModel(list(steps)), workdir=home, home=home,
                                retry=RetryPolicy(max_attempts=1))
                run.wait()
                assert run.status == "complete", run.error
                flush_records()
                if provider is not None:
                    assert provider.force_flush(30_000)
                times.append((time.process_time() - start) / (turns + 1))
    finally:
        use_tracer_provider(None)
        if provider is not None:
            provider.shutdown()
    return times


def measure(repeats: int, turns: int = 200, endpoint: str = "") -> dict[str, dict[str, float]]:
    """Median CPU ms per model call and per tool call in each mode, and the spread over repeats.
    The modes alternate within each repeat, so a machine that gets busier mid-way weighs on all."""
    for mode in MODES:  # warm-up: imports, first-use caches, the exporter's first connection
        per_turn(mode, 20, 1, 1, endpoint)
    one: dict[str, list[float]] = {mode: [] for mode in MODES}
    ten: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(repeats):
        for mode in MODES:
            one[mode] += per_turn(mode, turns, 1, 1, endpoint)
            ten[mode] += per_turn(mode, turns // 4, 10, 1, endpoint)
    out: dict[str, dict[str, float]] = {}
    for mode in MODES:
        per_tool = [(b - t) / 9 for b, t in zip(ten[mode], one[mode])]
        per_call = [t - p for t, p in zip(one[mode], per_tool)]
        out[mode] = {
            "model_call_ms": statistics.median(per_call) * 1e3,
            "model_call_min_ms": min(per_call) * 1e3, "model_call_max_ms": max(per_call) * 1e3,
            "tool_call_ms": statistics.median(per_tool) * 1e3,
            "tool_call_min_ms": min(per_tool) * 1e3, "tool_call_max_ms": max(per_tool) * 1e3,
        }
    return out


def direct(events: int = 20_000) -> dict[str, float]:
    """CPU microseconds the tracer itself takes per ``model_call`` event and per tool call (its
    started and finished events), fed straight to a RunTracer over the dropping exporter: the
    tracing share of the figures above without the engine's noise around it."""
    from lev_nb.engine import events as ev
    from lev_nb.observability.spans import RunTracer

    provider = _provider("spans", "")
    tracer = RunTracer(provider.get_tracer("bench"), "run-1", None)
    now = time.time()
    tracer(ev.RunStarted("run-1", None, agent="bench", task="t", workdir=".", ts=now))
    tracer(ev.StageEntered("run-1", "work", visit=1, ts=now))
    calls = [ev.ModelCall("run-1", "work", purpose="stage", provider="mock", model="m", iteration=i,
                          prompt_tokens=100, completion_tokens=10, cost_usd=0.001, started_at=now, ts=now)
             for i in range(events)]
    tools = [(ev.ToolCallStarted("run-1", "work", call_id=f"c{i}", tool="list_dir", ts=now),
              ev.ToolCallFinished("run-1", "work", call_id=f"c{i}", tool="list_dir", ok=True, summary="ok", ts=now))
             for i in range(events)]
    start = time.process_time()
    for call in calls:
        tracer(call)
    assert provider.force_flush(30_000)
    per_call = (time.process_time() - start) / events
    start = time.process_time()
    for begin, end in tools:
        tracer(begin)
        tracer(end)
    assert provider.force_flush(30_000)
    per_tool = (time.process_time() - start) / events
    provider.shutdown()
    return {"model_call_us": per_call * 1e6, "tool_call_us": per_tool * 1e6}


def with_collector(fn: Callable[[str], Any]) -> Any:
    """``fn(endpoint)`` with a collector stand-in running in a subprocess."""
    proc = subprocess.Popen([sys.executable, "-c", COLLECTOR], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        return fn(f"http://127.0.0.1:{port}")
    finally:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 7
    found = with_collector(lambda endpoint: measure(repeats, endpoint=endpoint))
    print(f"{'mode':<7} {'per model call (ms CPU)':>28} {'per tool call (ms CPU)':>28}")
    for mode, row in found.items():
        print(f"{mode:<7} {row['model_call_ms']:>10.3f} ({row['model_call_min_ms']:.3f}-{row['model_call_max_ms']:.3f})"
              f"      {row['tool_call_ms']:>10.3f} ({row['tool_call_min_ms']:.3f}-{row['tool_call_max_ms']:.3f})")
    alone = direct()
    print(f"the tracer alone: {alone['model_call_us']:.1f} us CPU per model call, "
          f"{alone['tool_call_us']:.1f} us per tool call (span made and handed to the batch processor)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "tracing", "repeats": repeats, "modes": found, "tracer_alone": alone},
                                  indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the first JSON Schema check in a fresh interpreter (issue 27: under 200 ms).

A run that checks its answer against a JSON Schema, or calls a script tool, compiles a validator:
the first one in a process pays for importing ``jsonschema``. At that import jsonschema's format
module imports every optional format library installed, and with JupyterLab's set one of them
compiles a grammar (1.5-3 s). lev_nb (``lev_nb.schemas.load_jsonschema``) defers those libraries
to the first format check that needs them; the baseline is what a plain ``import jsonschema`` with
its default format checker costs in the same environment. Each figure is the CPU time of the step
in a new process (on a shared machine the wall time mostly measures the other processes); the
wall time is printed beside it. Prints a table and writes bench/results/schema_import.json.

    .venv/bin/python bench/bench_schema_import.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "schema_import.json"
TARGET_MS = 200.0
SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}

LEV_NB = f"""
import json, time
import lev_nb.schemas
c0, t0 = time.process_time(), time.perf_counter()
validator, _ = lev_nb.schemas.compile_schema({SCHEMA!r})
validator.validate({{"title": "ok"}})
print(json.dumps({{"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0}}))
"""

PLAIN = f"""
import json, time
c0, t0 = time.process_time(), time.perf_counter()
import jsonschema
checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
jsonschema.Draft202012Validator({SCHEMA!r}, format_checker=checker).validate({{"title": "ok"}})
print(json.dumps({{"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0}}))
"""


def one(code: str) -> dict[str, float]:
    """Run ``code`` in a fresh interpreter (this repository first on the path); return its JSON."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(runs: int) -> dict[str, list[dict[str, float]]]:
    """``runs`` fresh processes each: lev_nb's first check and the plain import (after one warm-up
    of each, so bytecode caches are written as on a user's machine)."""
    one(LEV_NB), one(PLAIN)
    return {"lev_nb": [one(LEV_NB) for _ in range(runs)], "plain": [one(PLAIN) for _ in range(runs)]}


def main() -> None:
    """Measure, print the table, save the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure (median taken)")
    args = parser.parse_args()
    found = measure(args.runs)
    print(f"First JSON Schema check in a fresh interpreter, CPU ms (median of {args.runs}, min-max; wall median)")
    labels = {"lev_nb": "lev_nb.schemas.compile_schema", "plain": "import jsonschema + FORMAT_CHECKER"}
    summary = {}
    for key, label in labels.items():
        cpu = [r["cpu_s"] * 1e3 for r in found[key]]
        wall = statistics.median(r["wall_s"] for r in found[key]) * 1e3
        summary[key] = {"cpu_ms": statistics.median(cpu), "spread_ms": [min(cpu), max(cpu)], "wall_ms": wall}
        print(f"{label:38}{statistics.median(cpu):>8.1f} ms  {min(cpu):>7.1f}-{max(cpu):<7.1f}  wall {wall:.0f} ms")
    print(f"target: lev_nb under {TARGET_MS:g} ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()},
        "runs": args.runs, "target_ms": TARGET_MS, **summary,
    }, indent=2) + "\n")
    print(f"\nsaved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

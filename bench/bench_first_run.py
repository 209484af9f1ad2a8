"""Benchmark the first ``bp.run`` in a fresh interpreter (what a notebook's first run cell costs).

Each measurement is a new Python process (a fresh kernel has imported nothing of lev_nb): the time
``import lev_nb`` + ``lev_nb.load`` takes, then how long the first ``bp.run(...)`` takes to *return*
(the run goes on in the engine thread), then how long the run takes to finish on the mock model. The
baseline is the same process doing ``import json`` instead: the interpreter's own start-up.
Prints a table and writes bench/results/first_run.json.

    .venv/bin/python bench/bench_first_run.py [--runs N]
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
RESULTS = Path(__file__).parent / "results" / "first_run.json"

CHILD = """
import json, tempfile, time
t0, c0 = time.perf_counter(), time.process_time()
import lev_nb
bp = lev_nb.load({agent!r})
t1, c1 = time.perf_counter(), time.process_time()
run = bp.run("R-1: the app crashes when I save", model="mock", home=tempfile.mkdtemp())
t2, c2 = time.perf_counter(), time.process_time()
run.wait(60)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({{"import_load_s": t1 - t0, "first_run_returns_s": t2 - t1, "run_done_s": t3 - t2,
                   "import_load_cpu_s": c1 - c0, "first_run_returns_cpu_s": c2 - c1, "run_done_cpu_s": c3 - c2,
                   "status": run.status}}))
"""

BASELINE = "import json, time; t0 = time.perf_counter(); import json; print(json.dumps({'s': time.perf_counter() - t0}))"


def one(code: str) -> dict:
    """Run ``code`` in a fresh interpreter and return the JSON it prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Measure, print the table, save the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure (median taken)")
    args = parser.parse_args()
    agent = str(ROOT / "blueprints" / "triage")
    rows = [one(CHILD.format(agent=agent)) for _ in range(args.runs)]
    assert all(r["status"] == "complete" for r in rows), rows
    figures = {key: [r[key] for r in rows] for key in ("import_load_s", "first_run_returns_s", "run_done_s")}
    baseline = [one(BASELINE)["s"] for _ in range(args.runs)]
    print(f"First run in a fresh interpreter (median of {args.runs}, spread min-max)")
    print(f"{'':34}{'median':>10}{'min':>10}{'max':>10}")
    labels = {
        "import_load_s": "import lev_nb + load",
        "first_run_returns_s": "first bp.run returns",
        "run_done_s": "the run finishes (mock)",
    }
    for key, label in labels.items():
        values = figures[key]
        print(f"{label:34}{statistics.median(values)*1e3:>8.1f}ms{min(values)*1e3:>8.1f}ms{max(values)*1e3:>8.1f}ms")
    print(f"{'baseline: import json':34}{statistics.median(baseline)*1e3:>8.1f}ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()},
        "runs": args.runs,
        "median_s": {k: statistics.median(v) for k, v in figures.items()},
        "spread_s": {k: [min(v), max(v)] for k, v in figures.items()},
        "baseline_import_json_s": statistics.median(baseline),
    }, indent=2) + "\n")
    print(f"\nsaved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

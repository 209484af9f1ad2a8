"""Benchmark how long the ``lev`` command takes to start: ``lev --help``, ``lev --version`` and
``lev validate`` on a bundled agent, each as a whole process, next to a bare interpreter.

The target (issue 11) is ``lev --help`` under 150 ms: a newcomer's first command should answer at
once. Each command runs ``--runs`` times (10 by default) after one warm-up run, with bytecode
caching on as on a user's machine. Prints a table and writes bench/results/cli_startup.json.

    .venv/bin/python bench/bench_cli_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import scratch

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "cli_startup.json"
TARGET_HELP_MS = 150.0


def _child_env(home: str) -> dict[str, str]:
    """The environment for timed subprocesses: bytecode caching on, a private LEV_HOME."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["LEV_HOME"] = home
    return env


def _time_command(cmd: list[str], runs: int, env: dict[str, str]) -> list[float]:
    subprocess.run(cmd, capture_output=True, text=True, env=env)  # warm-up: caches, bytecode
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr}")
    return times


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per command (after one warm-up)")
    args = parser.parse_args(argv)
    lev = str(Path(sys.executable).parent / "lev")
    triage = str(ROOT / "blueprints" / "triage")
    with scratch.folder() as home:
        env = _child_env(home)
        rows = [
            ("python -c pass (baseline)", _time_command([sys.executable, "-c", "pass"], args.runs, env)),
            ("lev --help", _time_command([lev, "--help"], args.runs, env)),
            ("lev --version", _time_command([lev, "--version"], args.runs, env)),
            ("lev run --help", _time_command([lev, "run", "--help"], args.runs, env)),
            ("lev validate blueprints/triage", _time_command([lev, "validate", triage], args.runs, env)),
        ]
    print(f"{'command':<34} {'mean ms':>9} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'runs':>5}")
    for label, times in rows:
        print(f"{label:<34} {statistics.mean(times) * 1000:>9.1f} {statistics.median(times) * 1000:>10.1f} "
              f"{min(times) * 1000:>8.1f} {max(times) * 1000:>8.1f} {len(times):>5}")
    help_ms = statistics.mean(rows[1][1]) * 1000
    verdict = "under" if help_ms < TARGET_HELP_MS else "OVER"
    print(f"lev --help: {help_ms:.1f} ms on average, {verdict} the {TARGET_HELP_MS:.0f} ms target")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "cli_startup",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "note": "whole processes through the console script, bytecode cached, after one warm-up run",
        "target_help_ms": TARGET_HELP_MS,
        "results_ms": {
            label: {"mean": round(statistics.mean(t) * 1000, 2), "median": round(statistics.median(t) * 1000, 2),
                    "min": round(min(t) * 1000, 2), "max": round(max(t) * 1000, 2), "runs": len(t)}
            for label, t in rows
        },
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

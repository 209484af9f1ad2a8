"""Evaluation benchmark (issue 22): a 1,000-case ``lev_nb.evaluate`` on the mock model across 2
worker processes, against a plain ``lev_nb.run_many`` of the same 1,000 runs.

Not a test. Prints a table and writes bench/results/eval.json. Run it with:

    .venv/bin/python bench/bench_eval.py              # 1,000 cases, 3 rounds
    .venv/bin/python bench/bench_eval.py --cases 200 --rounds 1

Each round runs both, in a fresh subprocess each (alternating which goes first), with a fresh
LEV_HOME. The evaluation checks every answer three ways (the built-in ``contains``, a Rhai scorer
and a Python function), reads each run's meta.json for its tokens, cost, duration and stage path,
and writes its record under LEV_HOME/evals. Figures: wall time of each, the overhead per case
(evaluation minus plain batch, over the cases; noisy on a shared machine, so the evaluation's own
work besides its batch is also timed inside its process), and peak memory (max RSS) of the calling process
and of its largest worker.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import scratch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "eval.json"
AGENT = ROOT / "blueprints" / "triage"
PROCESSES = 2

CHILD = r"""
import json, os, resource, sys, time
import lev_nb
from lev_nb.eval import contains, scorer

def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    rows = [json.loads(line) for line in open(sys.argv[3])]
    dataset = [dict(rows[i % len(rows)], task=f"{rows[i % len(rows)]['task']} (#{i})") for i in range(n)]
    start = time.perf_counter()
    if mode == "plain":
        out = lev_nb.run_many(sys.argv[4], [r["task"] for r in dataset], model="mock", processes=2, show=False)
        ok = sum(s.ok for s in out)
    else:
        import lev_nb.batch as batch
        inner = batch.run_many
        batch_s = []

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                batch_s.append(time.perf_counter() - began)

        batch.run_many = timed  # the evaluation's own batch, timed apart from its own work
        checks = [contains("stage"), scorer(source='fn score(answer, row) { answer.len() > 0 }'),
                  lambda answer, case: answer.format == "csv"]
        ev = lev_nb.evaluate(sys.argv[4], dataset, checks=checks, model="mock", processes=2, show=False)
        ok = ev.passed
    wall = time.perf_counter() - start
    own = wall - batch_s[0] if mode == "eval" else 0.0
    print(json.dumps({"wall_s": wall, "ok": ok, "own_s": own, "load": os.getloadavg()[0],
                      "parent_max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "worker_max_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))

if __name__ == "__main__":
    main()
"""


def one(mode: str, cases: int) -> dict[str, Any]:
    """Run one mode in a fresh subprocess with a fresh LEV_HOME; its figures."""
    with scratch.folder(prefix="lev-bench-eval-") as home:
        script = Path(home) / "child.py"
        script.write_text(CHILD)
        env = {**os.environ, "LEV_HOME": str(Path(home) / "home"), "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, str(script), mode, str(cases), str(AGENT / "datasets" / "reports.jsonl"),
                              str(AGENT)], env=env, capture_output=True, text=True, check=True, cwd=home)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rounds: list[dict[str, Any]] = []
    for i in range(args.rounds):
        order = ["plain", "eval"] if i % 2 == 0 else ["eval", "plain"]
        rounds.append({mode: one(mode, args.cases) for mode in order})
        print(f"round {i + 1}: plain {rounds[-1]['plain']['wall_s']:.2f} s, eval {rounds[-1]['eval']['wall_s']:.2f} s",
              file=sys.stderr)
    plain = [r["plain"]["wall_s"] for r in rounds]
    ev = [r["eval"]["wall_s"] for r in rounds]
    overhead = [(r["eval"]["wall_s"] - r["plain"]["wall_s"]) / args.cases for r in rounds]
    result = {
        "cases": args.cases, "processes": PROCESSES, "rounds": rounds, "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "plain_run_many_s": statistics.median(plain), "evaluate_s": statistics.median(ev),
        "overhead_per_case_ms": statistics.median(overhead) * 1000,
        # What evaluate does besides its batch (fitting the dataset, the launch check, reading each
        # run's meta.json, the checks, the record), timed inside the same process: less noisy
        # than the difference of two walls on a shared machine.
        "own_work_per_case_ms": statistics.median(r["eval"]["own_s"] for r in rounds) / args.cases * 1000,
        "load_average_1min": [max(r[m]["load"] for m in r) for r in rounds],
        "overhead_spread_ms": [min(overhead) * 1000, max(overhead) * 1000],
        "parent_max_rss_mib": {m: max(r[m]["parent_max_rss_kib"] for r in rounds) / 1024 for m in ("plain", "eval")},
        "worker_max_rss_mib": {m: max(r[m]["worker_max_rss_kib"] for r in rounds) / 1024 for m in ("plain", "eval")},
        "all_passed": all(r["eval"]["ok"] == args.cases and r["plain"]["ok"] == args.cases for r in rounds),
    }
    rows = [
        ("plain run_many, wall", f"{result['plain_run_many_s']:.2f} s", f"{min(plain):.2f}-{max(plain):.2f}"),
        ("evaluate, wall", f"{result['evaluate_s']:.2f} s", f"{min(ev):.2f}-{max(ev):.2f}"),
        ("overhead per case", f"{result['overhead_per_case_ms']:.2f} ms",
         f"{result['overhead_spread_ms'][0]:.2f}-{result['overhead_spread_ms'][1]:.2f}"),
        ("evaluate's own work per case", f"{result['own_work_per_case_ms']:.2f} ms", "(besides its batch)"),
        ("caller max RSS, plain / eval", f"{result['parent_max_rss_mib']['plain']:.0f} / "
                                         f"{result['parent_max_rss_mib']['eval']:.0f} MiB", ""),
        ("largest worker max RSS, plain / eval", f"{result['worker_max_rss_mib']['plain']:.0f} / "
                                                 f"{result['worker_max_rss_mib']['eval']:.0f} MiB", ""),
    ]
    print(f"{args.cases} cases, triage on mock, {PROCESSES} processes, {args.rounds} rounds (median, min-max)")
    for name, value, spread in rows:
        print(f"  {name:<38} {value:>16}  {spread}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()

"""Benchmark for ``lev ps`` over a large run store: fake run folders, then the listing timed.

Builds N run folders in a temporary LEV_HOME from one meta.json template (varied ids, statuses and
the pid of a process that has exited, so most "running" records are abandoned), then times
``lev ps`` (and ``--all``, ``--json``) in a fresh process, as a person would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TEMPLATE: dict[str, Any] = {
    "run_id": "", "agent_name": "triage", "agent_path": "agents/triage/agent.leviath", "task": "hello",
    "model": "mock", "pid": 0, "status": "complete", "current_stage": "table", "stage_index": 3,
    "num_stages": 4, "iteration": 6, "prompt_tokens": 1805, "completion_tokens": 99, "cached_tokens": 0,
    "cache_write_tokens": 0, "tool_calls": 3, "workdir": "workdir", "started_at": "", "updated_at": "",
    "last_progress_at": "", "error": None, "metadata": {}, "parent_run_id": None, "children": [], "depth": 0,
    "max_child_depth": 3, "child_runs": [], "waiting_on": None,
    "flags": {"modified_files": [], "modified_file_count": 0, "empty_output": False, "no_output_tools": True,
              "searches_run": 0, "searches_empty": 0, "max_iterations_hit": 0, "gates_forced": 0,
              "required_regions_abandoned": [], "workspace_lost": False, "produced_output": True,
              "output_forced": 0, "splits_degraded": 0},
    "final_output": {"format": "csv", "stage": "table", "submitted_at": "", "bytes": 28, "truncated": False},
    "output_request": None, "stage_history": ["read", "check", "table"], "cost_usd": 0.0,
    "usage": {"total": {"calls": 8, "prompt_tokens": 1805, "completion_tokens": 99, "cost_usd": 0.0}},
    "needs_setup": None, "yolo": False, "allowed_tools": [], "pending": [], "resumed": None,
}


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped), so its runs read as abandoned."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def make_store(home: Path, n: int, live: int = 3) -> None:
    """``n`` run folders under ``home``: about two thirds abandoned (running/starting with a dead
    owner), the rest finished; ``live`` of them running with this process as their owner."""
    runs = home / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    gone = dead_pid()
    start = int(time.time()) - n * 10
    for i in range(n):
        secs = start + i * 10
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(secs))
        run_id = f"triage-{secs}-{i:012x}"
        meta = dict(TEMPLATE, run_id=run_id, started_at=stamp, updated_at=stamp, last_progress_at=stamp)
        if i >= n - live:
            meta.update(status="running", pid=os.getpid(), final_output=None)
        elif i % 3:
            meta.update(status="running" if i % 2 else "starting", pid=gone, final_output=None)
        else:
            meta.update(pid=gone)
        folder = runs / run_id
        folder.mkdir()
        (folder / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


def time_ps(home: Path, args: list[str], repeats: int = 1) -> tuple[float, int]:
    """Best wall time of ``lev ps ARGS`` in a fresh process, and how many lines it printed."""
    env = dict(os.environ, LEV_HOME=str(home))
    best, lines = float("inf"), 0
    for _ in range(repeats):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "lev_nb.cli", "ps", *args], env=env, check=True,
                             capture_output=True, text=True).stdout
        best = min(best, time.perf_counter() - t)
        lines = len(out.splitlines())
    return best, lines


def main() -> None:
    """``python bench/bench_ps.py [N]``: build N fake runs and print the timings."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15_000
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        make_store(Path(tmp), n)
        print(f"built {n:,} runs in {time.perf_counter() - t:.1f} s")
        for args in ([], ["--all"], ["--json"]):
            wall, lines = time_ps(Path(tmp), args)
            print(f"lev ps {' '.join(args):7} {wall:7.2f} s  {lines:,} lines")


if __name__ == "__main__":
    main()

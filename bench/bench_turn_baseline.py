"""The engine's own work per model turn, today's code next to the code issue 29 was filed against.

Issue 29 asks for the per-turn bookkeeping (recording, transitions, context assembly) halved. The
turn is bench_engine's: one stage, a zero-latency scripted model, one ``current_time`` call a turn,
the run record written as always. Both trees are measured in the same pass, each in its own fresh
process: the baseline's ``lev_nb`` and ``bench/`` come out of git (``git archive BASELINE``) into a
scratch folder, with this build's native module beside them (the turn never runs a Rhai script; the
module is only imported). Two figures: CPU per turn (the process's, medians of the repeats), and,
with valgrind, instructions per turn, which the machine's noise does not move: those of a run of 800
turns less those of a run of 200, over 600, counted on every thread but the caller's (the engine
loop's and the record writer's). The caller's thread only builds the scripted model's answers, waits
and, at the process's end, tears down what it holds; its count is reported apart. Neither figure
counts bench_engine's "bare" pass (the same answers and tool calls with no engine around them).

    .venv/bin/python bench/bench_turn_baseline.py            # prints both trees' figures as JSON
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any

import callgrind
import scratch

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "97f5a65"  # main just before the first commit for issue 29 (2026-12-02)
TURNS = 200  # a turn of each run is the closing text answer: runs x (TURNS + 1) turns
COUNTED_TURNS = (200, 800)  # the two runs whose instruction counts are subtracted

# Run in a fresh process with the tree to measure first on sys.path: argv = tree, repeats, mode.
CHILD = r"""
import json, statistics, sys, time
tree, repeats, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path[:0] = [tree, tree + "/bench"]
import lev_nb
assert lev_nb.__file__.startswith(tree), lev_nb.__file__
import bench_engine
bench_engine.overhead(turns=20, calls_per_turn=1, repeats=1)  # imports and first-use caches
if mode == "cpu":
    found = bench_engine.overhead(turns=TURNS, calls_per_turn=1, repeats=repeats, samples=True)
    print(json.dumps(found["engine_samples"]))
else:  # one run of `repeats` turns
    async def no_bare(*args, **kwargs):  # the CPU figure times the engine's run alone: so does this one
        return 0.0
    bench_engine._bare = no_bare
    bench_engine.overhead(turns=repeats, calls_per_turn=1, repeats=1)
""".replace("TURNS", str(TURNS))


def git_available() -> bool:
    """Whether this checkout has the history the baseline comes from."""
    if shutil.which("git") is None:
        return False
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{BASELINE}^{{commit}}"],
                           capture_output=True)
    return found.returncode == 0


@contextmanager
def baseline_tree() -> Iterator[str]:
    """The baseline's ``lev_nb`` and ``bench`` in a scratch folder, with this build's native module."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", BASELINE, "lev_nb", "bench"],
                             capture_output=True, check=True).stdout
    with scratch.folder(prefix="lev-baseline-") as tree:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        for native in (ROOT / "lev_nb").glob("_rhai*.so"):
            shutil.copy2(native, Path(tree) / "lev_nb" / native.name)
        yield tree


def _command(tree: str, repeats: int, mode: str) -> list[str]:
    return [sys.executable, "-c", CHILD, tree, str(repeats), mode]


def _checked(proc: subprocess.CompletedProcess[str], tree: str) -> subprocess.CompletedProcess[str]:
    if proc.returncode:
        raise SystemExit(f"turn bench child failed in {tree}: {proc.stderr[-3000:]}")
    return proc


def cpu_per_turn(tree: str, repeats: int) -> list[float]:
    """CPU seconds per turn of each repeat (the whole process: engine thread and record writer)."""
    proc = subprocess.run(_command(tree, repeats, "cpu"), capture_output=True, text=True, cwd=tree)
    return json.loads(_checked(proc, tree).stdout.strip().splitlines()[-1])


def instructions_per_turn(tree: str) -> dict[str, float] | None:
    """Instructions per turn (callgrind): ``engine``, every thread but the caller's, and ``caller``,
    the caller's own; None without valgrind."""
    if callgrind.valgrind() is None:
        return None
    counts = []
    for turns in COUNTED_TURNS:
        proc, counted = callgrind.run_counted_by_thread(_command(tree, turns, "instructions"), cwd=tree)
        _checked(proc, tree)
        if not counted:
            raise SystemExit("callgrind wrote no instruction counts")
        counts.append((sum(counted[1:]), counted[0]))
    turns = COUNTED_TURNS[1] - COUNTED_TURNS[0]
    return {"engine": (counts[1][0] - counts[0][0]) / turns, "caller": (counts[1][1] - counts[0][1]) / turns}


def measure(repeats: int = 15) -> dict[str, Any] | None:
    """Both trees' figures (``baseline`` and ``today``, with the baseline's ``commit``), or None when this checkout has no git history to take the baseline from."""
    if not git_available():
        return None
    out: dict[str, Any] = {"commit": BASELINE, "turns": TURNS}
    with baseline_tree() as old:
        for name, tree in (("baseline", old), ("today", str(ROOT))):
            samples = cpu_per_turn(tree, repeats)
            out[name] = {"cpu_s": statistics.median(samples), "cpu_spread_s": [min(samples), max(samples)],
                         "instructions": instructions_per_turn(tree)}
    return out


if __name__ == "__main__":
    print(json.dumps(measure(), indent=1))

"""Benchmark for ``lev_nb.runs()`` over a large run store: the run table a notebook asks for.

Builds N run folders (bench_ps.make_store: two thirds abandoned, the rest finished, a few live),
then times, in this process as a notebook would call it: ``lev_nb.runs()`` (every run; the
first call of a process, then again: a record read once is not parsed again while unchanged),
``lev_nb.runs(limit=50)`` (the newest 50), ``lev_nb.runs(status="complete")``, the table's
``to_pandas()``, and the plain alternative a person would otherwise write (json-loading every
meta.json). ``lev ps`` over the same store is timed in a fresh process (bench_ps.time_ps).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_ps


def plain_load(home: Path) -> list[dict[str, Any]]:
    """Every meta.json under ``home`` json-loaded: what one writes without lev_nb.runs()."""
    out = []
    for folder in os.scandir(home / "runs"):
        try:
            with open(os.path.join(folder.path, "meta.json"), encoding="utf-8") as handle:
                out.append(json.load(handle))
        except (OSError, ValueError):
            continue
    return out


def best(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """The best wall time of ``fn()`` over ``repeats`` calls, and its last result."""
    fastest, result = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        fastest = min(fastest, time.perf_counter() - t)
    return fastest, result


def measure(home: Path, repeats: int = 3) -> dict[str, tuple[float, int]]:
    """Seconds (best of ``repeats``) and rows of each way of reading the store at ``home``."""
    import lev_nb

    from lev_nb.explain.table import forget

    def cold() -> Any:
        forget()
        return lev_nb.runs(home=home)

    cases: dict[str, Callable[[], Any]] = {
        "plain json.load of every meta.json": lambda: plain_load(home),
        "lev_nb.runs(), first call": cold,
        "lev_nb.runs(), again": lambda: lev_nb.runs(home=home),
        "lev_nb.runs(limit=50)": lambda: lev_nb.runs(limit=50, home=home),
        "lev_nb.runs(status='complete')": lambda: lev_nb.runs(status="complete", home=home),
    }
    found: dict[str, tuple[float, int]] = {}
    for label, fn in cases.items():
        seconds, rows = best(fn, repeats)
        found[label] = (seconds, len(rows))  # type: ignore[arg-type]
    table = lev_nb.runs(home=home)
    try:
        seconds, frame = best(table.to_pandas, repeats)
        found["lev_nb.runs().to_pandas()"] = (seconds, len(frame))  # type: ignore[arg-type]
    except ImportError:
        pass
    return found


def main() -> None:
    """``python bench/bench_runs.py [N]``: build N fake runs and print the timings."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        bench_ps.make_store(home, n)
        for label, (seconds, rows) in measure(home).items():
            print(f"{label:40} {seconds * 1e3:8.1f} ms  {rows:,} rows")
        wall, lines = bench_ps.time_ps(home, [])
        print(f"{'lev ps (fresh process)':40} {wall * 1e3:8.1f} ms  {lines:,} lines")


if __name__ == "__main__":
    main()

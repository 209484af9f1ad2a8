"""Benchmark ``lev validate`` on a generated 40-stage blueprint.

Measures the whole process (``lev validate`` as a subprocess, median of several runs) and the
in-process time of ``load`` + ``validate``, next to the interpreter's ``import lev_nb`` startup as
the baseline. Prints a table and writes bench/results/validate.json.

    .venv/bin/python bench/bench_validate.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = 40
RESULTS = Path(__file__).parent / "results" / "validate.json"


def generate_blueprint(stages: int = STAGES) -> str:
    """A graph blueprint: a chain of work stages with back edges, gates, error edges to a recovery
    stage, and an output stage at the end (``stages`` in total)."""
    model = ('model = { models = [{ provider = "anthropic", model = "claude-sonnet-5" }, '
             '{ provider = "openai", model = "gpt-5.5" }, { provider = "ollama", model = "qwen3.5:9b" }] }')
    tools = '["read_file", "write_file", "edit_file", "shell", "context_write", "context_read"]'
    work = stages - 2
    last = f"s{work}"
    parts = ['[agent]\nname = "bench"\nversion = "1.0.0"\nentry_stage = "s0"\n',
             '[tool_permissions]\nshell = "ask"\n']
    for i in range(work):
        nxt = f"s{i + 1}" if i + 1 < work else last
        stage = (f'[stages.s{i}]\nmode = "autonomous"\n{model}\ndescription = "Step {i}"\nmax_iterations = 20\n'
                 f'max_revisits = 3\navailable_tools = {tools}\n'
                 f'system_prompt = """\nDo step {i} of the work and record what you did.\n"""\n\n'
                 f'[stages.s{i}.tool_routing]\ndefault_region = "tool_results"\n\n'
                 f'[stages.s{i}.transitions.{nxt}]\nhint = "Step {i} done"\ntransform = "compact"\n'
                 f'gate = {{ require_modifications = true, region = "work_log" }}\n\n')
        if i:
            stage += f'[stages.s{i}.transitions.s{i - 1}]\nhint = "Go back a step"\n\n'
        stage += f'[stages.s{i}.transitions.recover]\ncondition = "error"\n\n'
        stage += (f'[stages.s{i}.transitions.{last}]\ncondition = "stuck"\nstuck_after_iterations = 15\n'
                  f'stuck_after_minutes = 20\n') if nxt != last else ""
        parts.append(stage)
    parts.append(f'[stages.recover]\nmode = "autonomous"\n{model}\nmax_iterations = 5\n'
                 f'available_tools = ["read_file", "context_read"]\n\n[stages.recover.transitions.{last}]\n'
                 f'hint = "Report what we have"\n')
    parts.append(f'[stages.{last}]\nmode = "output"\n{model}\nmax_iterations = 5\n\n[stages.{last}.transitions]\n')
    parts.append('[context.regions]\nsystem = { kind = "pinned", budget = "2%" }\n'
                 'task = { kind = "pinned", budget = "2%", seed = "task_input" }\n'
                 'work_log = { kind = "compacting", budget = "10%", max_tokens = 60000 }\n'
                 'work_log_history = { kind = "compact_history", budget = "2%", source_region = "work_log" }\n'
                 'conversation = { kind = "sliding_window", budget = "20%", max_tokens = 80000 }\n')
    return "\n".join(parts)


def _child_env() -> dict[str, str]:
    """The environment for timed subprocesses: bytecode caching on, as on a user's machine."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _time_command(cmd: list[str], runs: int) -> list[float]:
    subprocess.run(cmd, capture_output=True, text=True, env=_child_env())  # warm-up: caches, bytecode
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env())
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr}")
    return times


def _time_in_process(folder: Path, runs: int) -> tuple[list[float], dict]:
    import lev_nb

    report = lev_nb.validate(folder)  # warm up: imports and first compiles
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        report = lev_nb.validate(lev_nb.load(folder))
        times.append(time.perf_counter() - start)
    return times, {"valid": report.valid, "errors": report.errors, "warnings": report.warnings,
                   "notes": report.notes}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="subprocess runs per measurement")
    parser.add_argument("--inproc-runs", type=int, default=50, help="in-process load+validate runs")
    args = parser.parse_args(argv)
    lev = str(Path(sys.executable).parent / "lev")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "bench-agent"
        folder.mkdir()
        text = generate_blueprint()
        (folder / "agent.leviath").write_text(text)
        baseline = _time_command([sys.executable, "-c", "import lev_nb"], args.runs)
        whole = _time_command([lev, "validate", str(folder)], args.runs)
        whole_json = _time_command([lev, "validate", "--json", str(folder)], args.runs)
        inproc, verdict = _time_in_process(folder, args.inproc_runs)

    rows = [
        ("python -c 'import lev_nb' (baseline)", baseline),
        ("lev validate (subprocess)", whole),
        ("lev validate --json (subprocess)", whole_json),
        ("load + validate (in process)", inproc),
    ]
    print(f"lev validate on a generated {STAGES}-stage blueprint ({len(text.splitlines())} lines)")
    print(f"{'measurement':<40} {'median ms':>10} {'min ms':>10} {'runs':>6}")
    for label, times in rows:
        print(f"{label:<40} {statistics.median(times) * 1000:>10.1f} {min(times) * 1000:>10.1f} {len(times):>6}")
    overhead = statistics.median(whole) - statistics.median(baseline)
    print(f"validate cost over the import baseline: {overhead * 1000:.1f} ms; verdict {verdict}")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "validate",
        "stages": STAGES,
        "blueprint_lines": len(text.splitlines()),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "verdict": verdict,
        "note": "subprocess timings use cached bytecode (PYTHONDONTWRITEBYTECODE unset) after one warm-up run",
        "results_ms": {
            label: {"median": round(statistics.median(t) * 1000, 2), "min": round(min(t) * 1000, 2), "runs": len(t)}
            for label, t in rows
        },
        "validate_over_baseline_ms": round(overhead * 1000, 2),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(Path(__file__).parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

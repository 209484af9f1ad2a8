"""The provider-script benchmark's parts (bench/bench_script_provider.py, issue 29): its four bench
agents run to their end through the bench provider script against the latency server, making the
model calls the benchmark counts on, and one engine-shape measurement reports every figure."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest
from support import ROOT


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    monkeypatch.syspath_prepend(str(ROOT))
    import bench_script_provider

    return bench_script_provider


def test_each_bench_agent_makes_its_model_calls_through_the_script(bench, home: Path) -> None:
    import lev_nb

    home.mkdir()
    with bench.latency_server(0.0) as port:
        bench.write_home(str(home), port)
        for name, _weight, calls in bench.MIX:
            before = bench.server_call(port, "/stats")["calls"]
            run = lev_nb.load(bench.AGENTS / name).run("summarise the report", home=home)
            run.wait(60)
            assert run.status == "complete", (name, run.status)
            assert bench.server_call(port, "/stats")["calls"] - before == calls, name


def test_the_engine_shape_reports_every_figure(bench) -> None:
    found = bench.run_engine(10, 0.0)
    assert found["statuses"] == {"complete": 10}
    assert found["model_calls"] == found["expected_calls"] == bench.expected_calls(10)
    for key in ("drain_s", "cpu_per_call_ms", "script_cpu_per_call_ms", "engine_cpu_per_call_ms", "peak_in_flight",
                "per_run_kib", "switches_per_call"):
        assert key in found
    assert found["script_cpu_per_call_ms"] > 0
    assert found["switches_per_call"] > 0  # at least the hand-off to a call thread and back
    # The sampler's reads of /proc are excluded; ten quick runs may spend less than one clock tick
    # (10 ms) in the kernel, so zero is a fair reading here.
    assert 0 <= found["kernel_cpu_per_call_ms"] < found["cpu_per_call_ms"]


def test_the_ram_baseline_keeps_its_run_store_in_ram(bench, monkeypatch: pytest.MonkeyPatch) -> None:
    if not bench.scratch.ram_available():
        pytest.skip("no RAM file system here")
    homes: list[str] = []
    made = bench.scratch.folder

    def noted(prefix: str = "lev-bench-", ram: bool = False):  # type: ignore[no-untyped-def]
        manager = made(prefix, ram)
        homes.append(manager.__enter__())
        return contextlib.nullcontext(homes[-1])

    monkeypatch.setattr(bench.scratch, "folder", noted)
    found = bench.run_engine(5, 0.0, ram=True)
    assert found["statuses"] == {"complete": 5}
    assert homes and all(Path(home).parent == bench.scratch.RAM_FOLDER for home in homes)
    assert any(label == bench.RAM_SHAPE for label, *_ in bench.shapes(big=False))


def test_a_scratch_folder_outlives_its_measurement_and_not_the_bench(tmp_path: Path) -> None:
    """Deleting a measurement's thousands of files slowed the next measurement's file creation, so
    the bench removes its folders when it exits, and only then."""
    import subprocess

    child = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "import scratch\n"
        "with scratch.folder(prefix='kept-') as made:\n"
        "    open(os.path.join(made, 'record'), 'w').write('x')\n"
        "print(made)\n"
        "print(os.path.isfile(os.path.join(made, 'record')))\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True,
                         env={**os.environ, "TMPDIR": str(tmp_path)})
    made, kept = out.stdout.split()
    assert Path(made).parent == tmp_path and Path(made).name.startswith("kept-")
    assert kept == "True"  # still there after its block
    assert not Path(made).exists()  # gone with the process


def test_the_in_process_mix_runs_every_run_to_its_end(bench, home: Path) -> None:
    """The child the engine's instruction count runs: the mix with the model answered in process."""
    import json
    import subprocess
    import sys

    home.mkdir()
    bench.write_home(str(home), 9)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_script_provider.py"), "--child-in-process", "10",
                           "--home", str(home)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=bench._env(str(home)))
    assert proc.returncode == 0, proc.stderr
    metas = [json.loads(p.read_text()) for p in (home / "runs").glob("*/meta.json")]
    assert len(metas) == 10 and {m["status"] for m in metas} == {"complete"}


def test_the_instruction_count_needs_valgrind_and_is_per_run(bench, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    if shutil.which("valgrind") is not None:
        counted = bench.engine_instructions(many=4, few=2)
        assert counted is not None and counted["instructions_per_run"] > 0
        assert counted["instructions_per_call"] < counted["instructions_per_run"]
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert bench.engine_instructions() is None


def test_the_upstream_is_measured_only_when_its_binary_is_named(bench, monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.delenv("LEV_UPSTREAM", raising=False)
    assert bench.upstream_binary() is None
    assert not any(label == bench.UPSTREAM_SHAPE for label, *_ in bench.shapes(big=True))
    monkeypatch.setenv("LEV_UPSTREAM", str(tmp_path / "missing"))
    assert bench.upstream_binary() is None
    binary = tmp_path / "lev"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("LEV_UPSTREAM", str(binary))
    assert [(label, n) for label, n, *_ in bench.shapes(big=True) if label == bench.UPSTREAM_SHAPE] == [
        (bench.UPSTREAM_SHAPE, 100), (bench.UPSTREAM_SHAPE, 1000)]


def test_a_long_conversation_is_handed_over_with_its_blocks_held(bench) -> None:
    found = bench.conversation_handover(41, 3)
    assert found["messages"] == 41
    assert found["held_ms"] > 0 and found["whole_ms"] > 0
    assert found["held_spread_ms"][0] <= found["held_ms"] <= found["held_spread_ms"][1]


def test_the_turn_baseline_comes_out_of_git_beside_this_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import bench_turn_baseline

    if not bench_turn_baseline.git_available():
        pytest.skip("a checkout without the history the baseline is taken from")
    with bench_turn_baseline.baseline_tree() as tree:
        old = Path(tree) / "lev_nb"
        assert (old / "engine" / "runner.py").is_file() and (Path(tree) / "bench" / "bench_engine.py").is_file()
        assert list(old.glob("_rhai*.so"))  # the turn imports the native module, never runs a script
        # Its own turn runs: one repeat, the tree's own lev_nb (the child checks which it imported).
        samples = bench_turn_baseline.cpu_per_turn(tree, 1)
        assert len(samples) == 1 and samples[0] > 0


def test_callgrind_counts_each_thread_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import callgrind

    if callgrind.valgrind() is None:
        pytest.skip("valgrind is not installed")
    # The main thread does almost nothing; the second thread sums a long range.
    program = ("import threading; t = threading.Thread(target=sum, args=(range(300_000),)); "
               "t.start(); t.join()")
    proc, counts = callgrind.run_counted_by_thread([sys.executable, "-S", "-c", program])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert counts is not None and len(counts) == 2
    _, whole = callgrind.run_counted([sys.executable, "-S", "-c", program])
    assert whole is not None and abs(sum(counts) - whole) < whole * 0.05
    _, quiet = callgrind.run_counted_by_thread([sys.executable, "-S", "-c",
                                                "import threading; t = threading.Thread(target=sum, args=(range(3),)); t.start(); t.join()"])
    assert quiet is not None and counts[1] > quiet[1] + 1_000_000  # the long sum is counted on its own thread

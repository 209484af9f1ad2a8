"""lev_nb.run_many: a batch across local worker processes and across a Dask LocalCluster, its
records in the caller's run store, its summaries, and a failed worker's runs retried or reported
(issue 15 "every core, then a cluster")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import BLUEPRINTS, ROOT, CrashingModel

import lev_nb
from lev_nb.providers import MockModel
from lev_nb.store import RunStore
from lev_nb.store.listing import list_runs

TASKS = ["R-1: the app crashes when I save", "R-2: the export is slow", "R-3: a typo on the login page",
         "R-4: dark mode resets"]


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker processes can import lev_nb and the tests' helpers (support.CrashingModel)."""
    paths = [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def recorded(home: Path) -> dict[str, str]:
    return {r["run_id"]: r["status"] for r in list_runs(home)}


def test_a_batch_runs_on_a_local_pool_and_records_in_the_callers_store(home: Path, importable: None) -> None:
    seen = []
    out = lev_nb.run_many(BLUEPRINTS / "triage", TASKS, model="mock", processes=2, on_progress=seen.append)
    assert [s.index for s in out] == [0, 1, 2, 3] and [s.task for s in out] == TASKS
    assert all(s.status == "complete" and s.ok for s in out), [s.error for s in out]
    assert all(s.output and RunStore(s.run_id, home).read_final_output() == s.output.encode() for s in out)
    assert {s.run_id: "complete" for s in out} == recorded(home)  # every record, in this home
    assert all(str(os.getpid()) not in (s.worker or "") for s in out)  # run in worker processes
    last = seen[-1]
    assert last.done and (last.total, last.complete, last.failed, last.started) == (4, 4, 0, 4)
    assert last.stages == {}  # nothing is in flight at the end


def test_a_crashed_worker_process_has_its_runs_retried(home: Path, tmp_path: Path, importable: None) -> None:
    model = CrashingModel(str(tmp_path / "crashed-once"))
    out = lev_nb.run_many(BLUEPRINTS / "triage", TASKS, model=model, processes=2)
    assert (tmp_path / "crashed-once").exists()  # a worker did die
    assert all(s.status == "complete" for s in out), [s.error for s in out]
    assert max(s.attempts for s in out) == 2


def test_a_worker_that_keeps_crashing_is_reported_with_the_reason(home: Path, tmp_path: Path, importable: None) -> None:
    out = lev_nb.run_many(BLUEPRINTS / "triage", TASKS[:2], model=CrashingModel("", always=True), processes=2)
    assert [s.status for s in out] == ["failed", "failed"]
    assert all("worker failed" in (s.error or "") and s.attempts == 2 for s in out)


def test_a_task_that_cannot_start_in_its_worker_is_reported_and_the_rest_run(home: Path, importable: None) -> None:
    out = lev_nb.run_many(BLUEPRINTS / "triage", TASKS[:2], model="mock", processes=1, output_format="cvs")
    assert [s.status for s in out] == ["failed", "failed"]
    assert all("misspelling of 'csv'" in (s.error or "") and s.run_id is None for s in out)
    assert recorded(home) == {}  # refused before anything was written


def test_a_batch_runs_on_a_dask_local_cluster(home: Path, tmp_path: Path, importable: None) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            out = lev_nb.run_many(BLUEPRINTS / "triage", TASKS, model="mock", client=client)
            assert all(s.status == "complete" for s in out), [s.error for s in out]
            assert {s.run_id: "complete" for s in out} == recorded(home)
            # A worker process that dies mid-share: Dask reschedules the share, the batch completes.
            crashed = lev_nb.run_many(BLUEPRINTS / "triage", TASKS[:2], model=CrashingModel(str(tmp_path / "once")),
                                      client=cluster.scheduler_address)
            assert (tmp_path / "once").exists()
            assert all(s.status == "complete" for s in crashed), [s.error for s in crashed]


def test_lev_run_count_workers_sends_the_copies_across_processes(lev, home: Path, importable: None) -> None:
    result = lev("run", str(BLUEPRINTS / "triage"), "--task", TASKS[0], "--model", "mock", "--count", "4",
                 "--workers", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    ids = result.stdout.split()
    assert len(ids) == 4 and recorded(home) == dict.fromkeys(ids, "complete")


def test_lev_run_count_workers_writes_one_progress_line_when_stderr_is_not_a_terminal(
    lev, home: Path, importable: None
) -> None:
    result = lev("run", str(BLUEPRINTS / "triage"), "--task", TASKS[0], "--model", "mock", "--count", "3",
                 "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("3/3 finished: 0 running, 3 complete, 0 failed, 2 workers, ")
    assert result.stderr.count("\n") == 1 and "\r" not in result.stderr  # one line, nothing run together


def test_the_progress_says_which_stages_the_runs_in_flight_are_in(home: Path, importable: None) -> None:
    seen: list[dict[str, int]] = []
    out = lev_nb.run_many(BLUEPRINTS / "triage", TASKS, model=MockModel(latency_s=0.3), processes=2,
                          on_progress=lambda p: seen.append(dict(p.stages)))
    assert all(s.ok for s in out), [s.error for s in out]
    stages = set().union(*seen)
    assert stages and stages <= {"starting", *lev_nb.load(BLUEPRINTS / "triage").stages}


def test_a_misspelt_option_is_refused_once_before_any_worker_starts(home: Path) -> None:
    from lev_nb.engine.launch import LaunchError

    with pytest.raises(LaunchError, match="did you mean 'pin_cpus'"):
        lev_nb.run_many(BLUEPRINTS / "triage", TASKS, model="mock", processes=2, pin_cpu=True)
    assert recorded(home) == {}  # nothing ran


SLEEPER = """
[agent]
name = "sleeper"
[tool_permissions]
shell = "allow"
[stages.work]
available_tools = ["shell"]
nudge = { enabled = false }
[stages.work.transitions]
"""

INTERRUPTED = """
import sys
import lev_nb
try:
    lev_nb.run_many(sys.argv[1], ["a", "b", "c", "d", "e", "f"], model=sys.argv[2], processes=2, concurrency=2,
                    workdir=sys.argv[3])
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


@pytest.mark.slow
def test_ctrl_c_stops_a_batch_and_every_record_says_how_its_run_ended(tmp_path: Path, importable: None) -> None:
    # Issue 26: a Ctrl-C (SIGINT to the terminal's whole process group, the workers included)
    # sometimes hung run_many and left records 'starting'.
    import json
    import signal
    import subprocess
    import sys
    import time

    folder, work, home = tmp_path / "sleeper", tmp_path / "work", tmp_path / "home"
    for path in (folder, work, home):
        path.mkdir()
    (folder / "agent.leviath").write_text(SLEEPER, encoding="utf-8")
    (home / "config.toml").write_text("[security]\nallow_blueprint_permissions = true\n", encoding="utf-8")
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "shell", "arguments": {
        "command": "mktemp -p . started.XXXX; sleep 300"}}]}, {"text": "done"}]), encoding="utf-8")
    # A terminal's foreground job takes Ctrl-C; a test runner started in the background (a CI job
    # behind `&`) ignores SIGINT, and an ignored signal stays ignored across exec.
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(folder), f"scripted:{script}", str(work)],
                            env={**os.environ, "LEV_HOME": str(home)}, start_new_session=True, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(list(work.glob("started.*"))) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert len(list(work.glob("started.*"))) >= 2, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("run_many did not stop after Ctrl-C")
    assert proc.returncode == 130 and out.strip() == "interrupted", err
    statuses = recorded(home)
    assert statuses and set(statuses.values()) == {"cancelled"}, statuses

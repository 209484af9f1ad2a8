"""``lev ps`` over a store full of abandoned runs: they fold into one line, ``--all`` lists them,
``--json`` says how many it left out, and live runs are always shown (store/listing.py scan_runs).
``lev run --count`` above its limit is refused with the way to run a bigger batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lev_nb.store import RunMeta, encode_meta
from tests.support import ROOT

TRIAGE = str(ROOT / "blueprints" / "triage")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: this pid belongs to nobody now
    return proc.pid


def record(home: Path, n: int, status: str, pid: int, parent: str | None = None, task: str = "t",
           metadata: dict | None = None) -> str:
    """Write run ``n``'s meta.json as RunStore does; its id carries second ``n``, so higher is newer."""
    run_id = f"triage-{1_700_000_000 + n}-{n:012x}"
    meta = RunMeta(run_id=run_id, agent_name="triage", task=task, pid=pid, status=status,
                   parent_run_id=parent, updated_at="2999-01-01T00:00:00Z", metadata=metadata or {}).to_dict()
    folder = home / "runs" / run_id
    folder.mkdir(parents=True)
    (folder / "meta.json").write_bytes(encode_meta(meta))
    return run_id


def test_abandoned_runs_fold_into_one_line_and_live_ones_still_show(home: Path, lev) -> None:
    gone = dead_pid()
    abandoned = [record(home, i, ("running", "starting", "waiting_input")[i % 3], gone) for i in range(30)]
    # A task that quotes a status must not be read as the record's own status.
    live = record(home, 31, "running", os.getpid(), task='say "status": "complete" please')
    done = record(home, 32, "complete", gone)
    paused = record(home, 33, "paused", gone)  # no owner by design: waits for lev resume
    child = record(home, 34, "running", gone, parent=live)  # a dead worker under a live run shows
    out = lev("ps")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[-1] == ("30 abandoned runs (their process is gone): lev ps --all lists them; "
                         "lev resume RUN_ID continues one")
    assert not any(run_id in out.stdout for run_id in abandoned)
    for run_id in (live, done, paused, child):
        assert run_id in out.stdout
    row = next(line for line in lines if line.startswith(live))
    assert "  running  " in row and "abandoned" not in row
    assert "running (abandoned)" in next(line for line in lines if child in line)
    data = json.loads(lev("ps", "--json").stdout)
    assert [r["run_id"] for r in data["runs"]] == [paused, live]
    assert [r["run_id"] for r in data["abandoned"]] == [child] and data["abandoned_not_listed"] == 30


def test_ps_all_lists_abandoned_runs(home: Path, lev) -> None:
    gone = dead_pid()
    ids = [record(home, i, "running", gone) for i in range(5)]
    out = lev("ps", "--all")
    assert out.returncode == 0 and "abandoned runs (their process is gone)" not in out.stdout
    assert all(run_id in out.stdout for run_id in ids)
    assert out.stdout.count("running (abandoned)") == 5


def test_only_abandoned_runs_print_just_the_fold_line(home: Path, lev) -> None:
    record(home, 1, "starting", dead_pid())
    out = lev("ps")
    assert out.stdout.strip() == ("1 abandoned run (their process is gone): lev ps --all lists them; "
                                  "lev resume RUN_ID continues one")


def test_ps_json_lists_live_and_finished_and_counts_the_abandoned(home: Path, lev) -> None:
    gone = dead_pid()
    abandoned = [record(home, i, "running", gone) for i in range(4)]
    live = record(home, 10, "running", os.getpid())
    done = [record(home, 20 + i, "complete", gone) for i in range(25)]
    data = json.loads(lev("ps", "--json").stdout)
    assert set(data) == {"runs", "finished", "abandoned", "abandoned_not_listed"}
    assert [r["run_id"] for r in data["runs"]] == [live]
    assert [r["run_id"] for r in data["finished"]] == done[::-1][:20]  # the newest 20, newest first
    assert data["abandoned"] == [] and data["abandoned_not_listed"] == 4
    data = json.loads(lev("ps", "--all", "--json").stdout)
    assert [r["run_id"] for r in data["abandoned"]] == abandoned[::-1]
    assert data["abandoned"][0]["status_text"] == "running (abandoned)"
    assert len(data["finished"]) == 25 and data["abandoned_not_listed"] == 0


def test_finished_children_of_a_live_run_are_listed_however_old(home: Path, lev) -> None:
    gone = dead_pid()
    parent = record(home, 1, "running", os.getpid())
    kid = record(home, 2, "complete", gone, parent=parent)
    for i in range(30):  # newer finished runs push the child's own time out of the recent cut
        record(home, 100 + i, "complete", gone)
    data = json.loads(lev("ps", "--json").stdout)
    assert kid in [r["run_id"] for r in data["finished"]]
    assert kid in lev("ps").stdout


def test_a_metadata_key_named_like_the_parent_link_does_not_move_a_run(home: Path) -> None:
    from lev_nb.store.listing import scan_runs

    parent = record(home, 1, "complete", os.getpid())
    root = record(home, 2, "complete", os.getpid(), metadata={"parent_run_id": parent})
    kid = record(home, 3, "complete", os.getpid(), parent=parent, metadata={"parent_run_id": None})
    parents = {entry.run_id: entry.parent for entry in scan_runs(home)}
    assert parents == {parent: None, root: None, kid: parent}


def test_count_above_the_limit_is_refused_with_the_way_out(lev) -> None:
    from lev_nb.cli.run_commands import MAX_COUNT

    out = lev("run", TRIAGE, "--task", "x", "--model", "mock", "--count", str(MAX_COUNT + 1))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"lev run: --count {MAX_COUNT + 1} is more than {MAX_COUNT} copies in one "
                                  "process; for a bigger batch add --workers K (worker processes) or call "
                                  "lev_nb.run_many")

"""`lev run --count N`, `lev run --max-depth N` and `lev ps` with runs that start runs (issue 10)."""

from __future__ import annotations

import json
from pathlib import Path

from support import ROOT, Lev

TRIAGE = str(ROOT / "blueprints" / "triage")

RECURSIVE = """
[agent]
name = "rec"
[stages.go]
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
available_tools = ["spawn_agent"]
nudge = { enabled = false }
[stages.go.transitions]
"""


def spawn_turn() -> dict:
    return {"tool_calls": [{"name": "spawn_agent", "arguments": {"blueprint": "rec", "task": "deeper", "wait": True}}]}


def recursive_agent(tmp_path: Path, turns: list[dict]) -> tuple[Path, Path]:
    folder = tmp_path / "rec"
    folder.mkdir()
    (folder / "agent.leviath").write_text(RECURSIVE, encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns), encoding="utf-8")
    return folder, script


def test_count_starts_copies_and_prints_their_ids(lev: Lev, home: Path) -> None:
    out = lev("run", TRIAGE, "--task", "1. it crashes", "--model", "mock", "--count", "3")
    assert out.returncode == 0, out.stderr
    ids = out.stdout.split()
    assert len(ids) == len(set(ids)) == 3
    for run_id in ids:
        meta = json.loads((home / "runs" / run_id / "meta.json").read_text())
        assert (meta["status"], meta["task"]) == ("complete", "1. it crashes")
        assert f"lev run: {run_id} ended complete" in out.stderr
    assert len({json.loads((home / "runs" / i / "meta.json").read_text())["workdir"] for i in ids}) == 3


def test_count_with_json_prints_a_json_list_of_ids(lev: Lev, home: Path) -> None:
    out = lev("run", TRIAGE, "--task", "1. it crashes", "--model", "mock", "--count", "3", "--json", "--quiet")
    assert out.returncode == 0, out.stderr
    ids = json.loads(out.stdout)
    assert isinstance(ids, list) and len(set(ids)) == 3
    assert all((home / "runs" / i / "meta.json").is_file() for i in ids)
    assert out.stderr == ""


def test_count_exits_non_zero_when_a_copy_fails(lev: Lev, tmp_path: Path) -> None:
    script = tmp_path / "fails.json"
    script.write_text(json.dumps([{"error": {"kind": "auth", "message": "no such key"}}]), encoding="utf-8")
    out = lev("run", TRIAGE, "--task", "x", "--model", f"scripted:{script}", "--count", "2", "--quiet")
    assert out.returncode == 1
    assert len(out.stdout.split()) == 2
    assert "2 of 2 copies did not complete" in out.stderr


def test_count_and_max_depth_must_be_sensible(lev: Lev) -> None:
    out = lev("run", TRIAGE, "--task", "x", "--model", "mock", "--count", "0")
    assert (out.returncode, out.stderr.strip()) == (2, "lev run: --count must be 1 or more, got 0")
    out = lev("run", TRIAGE, "--task", "x", "--model", "mock", "--max-depth", "-1")
    assert (out.returncode, out.stderr.strip()) == (2, "lev run: --max-depth must be 0 or more, got -1")


def test_max_depth_zero_refuses_every_sub_agent(lev: Lev, home: Path, tmp_path: Path) -> None:
    folder, script = recursive_agent(tmp_path, [spawn_turn(), {"text": "did it myself"}])
    out = lev("run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--max-depth", "0", "--json")
    assert out.returncode == 0, out.stderr
    meta = json.loads(out.stdout)
    assert (meta["children"], meta["max_child_depth"]) == ([], 0)
    events = (home / "runs" / meta["run_id"] / "events.jsonl").read_text()
    assert "[error] sub-agent depth limit (0) reached: no sub-agents are allowed at all" in events
    assert "--max-depth" in events


def test_ps_shows_each_child_under_its_parent(lev: Lev, home: Path, tmp_path: Path) -> None:
    # rec spawns rec spawns rec (refused at depth 2), and each answers on the way back up.
    turns = [spawn_turn(), spawn_turn(), spawn_turn(), {"text": "c"}, {"text": "b"}, {"text": "a"}]
    folder, script = recursive_agent(tmp_path, turns)
    out = lev("run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--max-depth", "2", "--quiet")
    assert out.returncode == 0, out.stderr
    root = out.stdout.strip()
    [child] = json.loads((home / "runs" / root / "meta.json").read_text())["children"]
    [grandchild] = json.loads((home / "runs" / child / "meta.json").read_text())["children"]
    lines = lev("ps").stdout.splitlines()[1:]
    assert [line.split()[0:2] for line in lines] == [[root, "rec"], ["└", child], ["└", grandchild]]
    assert lines[1].startswith("  └ ") and lines[2].startswith("    └ ")
    rows = {r["run_id"]: r for r in json.loads(lev("ps", "--json").stdout)["finished"]}
    assert rows[grandchild]["parent_run_id"] == child and rows[child]["parent_run_id"] == root


def test_ps_folds_a_long_list_of_workers(lev: Lev, home: Path) -> None:
    from lev_nb.cli.run_status import CHILD_ROWS

    runs = home / "runs"
    parent = {"run_id": "p-1-aaaaaaaaaaaa", "agent_name": "wide", "status": "complete", "started_at": "2026-01-01T00:00:00.000Z"}
    metas = [parent] + [
        {"run_id": f"w-1-{n:012d}", "agent_name": "wide", "status": "complete", "parent_run_id": parent["run_id"],
         "started_at": f"2026-01-01T00:00:{n:02d}.000Z"}
        for n in range(CHILD_ROWS + 5)
    ]
    for meta in metas:
        (runs / meta["run_id"]).mkdir(parents=True)
        (runs / meta["run_id"] / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    lines = lev("ps").stdout.splitlines()[1:]
    assert lines[0].startswith(parent["run_id"])
    assert len(lines) == 1 + CHILD_ROWS + 1
    assert "... and 5 more (lev ps --all shows them)" in lines[-1]
    assert len(lev("ps", "--all").stdout.splitlines()[1:]) == 1 + CHILD_ROWS + 5


def test_ps_says_when_a_run_waits_for_its_children() -> None:
    from lev_nb.cli.run_status import status_text

    assert status_text({"status": "running", "waiting_on": {"reason": "children", "outstanding": 2}}) == "waiting: children(2)"


def test_run_help_names_the_new_options(lev: Lev) -> None:
    out = lev("run", "--help")
    assert "--max-depth N" in out.stdout and "--count N" in out.stdout
    assert "lev ps` lists each child under its parent" in out.stdout


def test_ps_json_keeps_other_runs_beside_a_large_fan_out(lev: Lev, home: Path) -> None:
    from lev_nb.cli.run_status import RECENT_FINISHED

    runs = home / "runs"
    older = {"run_id": "solo-1-aaaaaaaaaaaa", "agent_name": "solo", "status": "complete", "started_at": "2026-01-01T00:00:00.000Z",
             "updated_at": "2026-01-01T00:00:00.000Z"}
    parent = {"run_id": "wide-2-bbbbbbbbbbbb", "agent_name": "wide", "status": "complete", "started_at": "2026-01-02T00:00:00.000Z",
              "updated_at": "2026-01-02T00:00:00.000Z"}
    workers = [{"run_id": f"wide-2-{n:012d}", "agent_name": "wide", "status": "complete", "parent_run_id": parent["run_id"],
                "started_at": "2026-01-02T00:00:01.000Z", "updated_at": "2026-01-02T00:00:01.000Z"}
               for n in range(RECENT_FINISHED + 5)]
    for meta in [older, parent, *workers]:
        (runs / meta["run_id"]).mkdir(parents=True)
        (runs / meta["run_id"] / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    finished = [r["run_id"] for r in json.loads(lev("ps", "--json").stdout)["finished"]]
    assert older["run_id"] in finished and parent["run_id"] in finished
    assert len(finished) == 2 + len(workers)

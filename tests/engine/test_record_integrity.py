"""Issue 12 items 5 and 10: the run record stays whole and the run's own.

A disk that fills up (ENOSPC) or a file-size limit (EFBIG) part-way through a run ends the run in
error; events.jsonl and transcript.jsonl keep only whole lines, and ``lev run``'s exit status agrees
with meta.json. With the shell allowed and no sandbox, an agent that appends lines to its own
record has them cut off, and the run ends in error saying so (in a sandbox it cannot see the record
at all: tests/engine/test_sandbox.py)."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import QUIET_WORK_STAGE, ROOT, call, say

from lev_nb import _rhai


def _whole_lines(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), "a line was cut short"
    return [json.loads(line) for line in raw.splitlines()]


def test_a_full_disk_mid_run_ends_it_in_error_with_whole_lines(engine, monkeypatch: pytest.MonkeyPatch) -> None:
    # The disk fills at the native append (lev_nb._rhai.append_batch), which then reports ENOSPC for
    # events.jsonl. That it undoes a line it wrote only part of is proven with a real limit below.
    real_append = _rhai.append_batch
    room = 3000  # bytes events.jsonl may hold before the disk is full (however the writes are batched)

    def filling_disk(appends: list[tuple[str, bytes, int | None]]) -> list[tuple[int, int, int]]:
        outcomes = []
        for path, data, expected in appends:
            size = os.path.getsize(path) if os.path.exists(path) else 0
            if path.endswith("events.jsonl") and size + len(data) > room:
                outcomes.append((size, 0, errno.ENOSPC))
            else:
                outcomes.extend(real_append([(path, data, expected)]))
        return outcomes

    monkeypatch.setattr(_rhai, "append_batch", filling_disk)
    turns = [call("list_dir", path=".")] * 30 + [say("done")]
    run, _ = engine.run(QUIET_WORK_STAGE, turns)
    monkeypatch.undo()
    assert run.status == "error", run.error
    assert "No space left on device" in run.error and "events.jsonl" in run.error
    folder = Path(run.run_dir)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["status"] == "error" and "No space left on device" in meta["error"]
    events = folder / "events.jsonl"  # absent when the first batch already did not fit
    lines = _whole_lines(events) if events.exists() else []
    assert not lines or lines[0]["type"] == "run_started"


def test_lev_run_exit_status_agrees_with_the_record_over_a_file_size_limit(tmp_path: Path) -> None:
    # A real limit on file size (RLIMIT_FSIZE) in a child `lev run`: the record's .jsonl files
    # outgrow it (EFBIG) while meta.json stays small.
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "big"\n' + QUIET_WORK_STAGE)
    turns = [{"text": "x" * 4000, "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}] * 40
    script = tmp_path / "turns.json"
    script.write_text(json.dumps(turns + [{"text": "done"}]))
    (tmp_path / "work").mkdir()
    env = dict(os.environ, LEV_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    proc = subprocess.run(
        [sys.executable, "-m", "lev_nb.cli", "run", str(agent), "--task", "t", "--model", f"scripted:{script}",
         "--workdir", str(tmp_path / "work"), "--quiet"],
        capture_output=True, text=True, env=env, preexec_fn=limit, timeout=120, check=False,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    (folder,) = (tmp_path / "home" / "runs").iterdir()
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["status"] == "error" and "File too large" in meta["error"], meta
    for name in ("events.jsonl", "transcript.jsonl"):
        if (folder / name).exists():
            _whole_lines(folder / name)


@pytest.mark.usefixtures("blueprint_permissions")
def test_forged_record_lines_are_cut_and_end_the_run(engine) -> None:
    forged = '{"kind": "completed", "status": "complete", "note": "forged"}'
    toml = ('[stages.work]\navailable_tools = ["shell"]\ntool_permissions = { shell = "allow" }\n'
            "nudge = { enabled = false }\n[stages.work.transitions]\n")
    # The command finds its own record the way an agent could: the newest run folder in LEV_HOME.
    # (A program, not a redirect: a redirect outside the workdir is refused before it runs.)
    forger = engine.workdir / "forge.py"
    forger.write_text(textwrap.dedent(f"""
        import glob, os
        folder = max(glob.glob({str(engine.home)!r} + "/runs/*/"), key=os.path.getmtime)
        with open(os.path.join(folder, "events.jsonl"), "a") as f:
            f.write({forged!r} + "\\n")
    """))
    command = f"{sys.executable} forge.py"
    run, _ = engine.run(toml, [call("shell", command=command), say("done"), say("done")])
    assert run.status == "error", run.error
    assert "something other than lev_nb wrote into the run record" in run.error
    lines = _whole_lines(Path(run.run_dir) / "events.jsonl")
    assert not [line for line in lines if line.get("note") == "forged"]
    assert json.loads((Path(run.run_dir) / "meta.json").read_text())["status"] == "error"

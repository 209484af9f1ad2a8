"""Issue 12 item 5: the run record and the disk. The record exists before the run starts; a run
that cannot write it does not start; a record that stops reaching the disk ends the run in error
(so ``lev run``'s exit status agrees with it); the owner's pid is recorded, so ``lev ps`` calls a
run whose process is gone abandoned at once."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import WORK_STAGE, call, say

from lev_nb import _rhai
from lev_nb.cli.run_status import status_text
from lev_nb.store import RecordUnwritable, RunStore


def test_the_record_exists_before_the_run_starts_with_the_pid(engine, home: Path):
    run, _ = engine.start(WORK_STAGE, [call("list_dir"), say("ok")])
    # Written synchronously by start_run: readable before the engine has done anything.
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["pid"] == os.getpid()
    run.wait(30)
    assert json.loads((Path(run.run_dir) / "meta.json").read_text())["pid"] == os.getpid()


def test_a_run_that_cannot_write_its_record_does_not_start(engine, tmp_path: Path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where LEV_HOME's runs folder should be")
    with pytest.raises(RecordUnwritable) as info:
        engine.start(WORK_STAGE, [say("never")], home=blocked)
    assert str(blocked) in str(info.value) and "cannot write the run record" in str(info.value)


def test_lev_run_on_an_unwritable_home_is_one_clear_line(tmp_path: Path, lev, home: Path):
    home.mkdir(parents=True, exist_ok=True)
    blocked = home / "runs"  # a file where the runs folder should be (root ignores a chmod)
    blocked.write_text("x")
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "disk"\n' + WORK_STAGE)
    proc = lev("run", str(agent), "--task", "t", "--model", "mock", "--quiet")
    assert proc.returncode == 1
    assert proc.stderr.startswith("lev run: cannot write the run record in ") and str(blocked) in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_record_that_stops_reaching_the_disk_ends_the_run_in_error(engine, monkeypatch):
    real = _rhai.replace_batch  # the native call that replaces meta.json (lev_nb.store.files)
    metas = {"n": 0}

    def full_disk(files: list[tuple[str, str, bytes, bool, bool]]) -> list[int]:
        codes = []
        for item in files:
            if item[0].endswith("meta.json"):
                metas["n"] += 1
                if metas["n"] > 1:  # the first write (before the run starts) lands; then the disk is full
                    codes.append(errno.ENOSPC)
                    continue
            codes.extend(real([item]))
        return codes

    monkeypatch.setattr(_rhai, "replace_batch", full_disk)
    run, _ = engine.run(WORK_STAGE, [call("list_dir"), say("ok")])
    assert run.status == "error"
    assert "could not be written" in run.error and "No space left on device" in run.error
    assert run.run_dir in run.error


def test_lev_ps_calls_a_run_of_a_dead_process_abandoned_at_once():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: this pid belongs to nobody now
    meta = {"status": "running", "pid": proc.pid, "updated_at": "2999-01-01T00:00:00Z"}
    assert status_text(meta) == "running (abandoned)"
    assert status_text({**meta, "pid": os.getpid()}) == "running"


def test_lev_ps_calls_a_run_killed_while_starting_abandoned():
    # `lev run --count 1000` killed while it launches leaves records that never left "starting";
    # they were listed as "starting" for ever (lev resume takes them).
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    meta = {"status": "starting", "pid": proc.pid, "updated_at": "2999-01-01T00:00:00Z"}
    assert status_text(meta) == "starting (abandoned)"
    assert status_text({**meta, "pid": os.getpid()}) == "starting"

"""The start gate of an agent's command (:class:`lev_nb.tools.reaper.Gate`).

A command is put on the watcher's list only after it has started; the gate keeps it from running
until then, so a lev_nb process killed in between leaks nothing, and one killed before it opened
the gate runs nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from lev_nb.tools.reaper import Gate


def test_a_gated_command_runs_once_the_gate_opens(tmp_path: Path) -> None:
    gate = Gate()
    proc = subprocess.Popen(gate.argv(["sh", "-c", "echo ran > out; cat; echo stdin-was-empty >> out"]),
                            cwd=tmp_path, stdin=gate.stdin, start_new_session=True)
    time.sleep(0.2)
    assert not (tmp_path / "out").exists()  # still waiting at the gate
    gate.open(proc.pid)
    assert proc.wait(timeout=30) == 0
    assert (tmp_path / "out").read_text().split() == ["ran", "stdin-was-empty"]


def test_a_command_whose_starter_dies_before_the_gate_opens_never_runs(tmp_path: Path) -> None:
    starter = textwrap.dedent(f"""
        import os, subprocess
        from lev_nb.tools.reaper import Gate
        gate = Gate()
        proc = subprocess.Popen(gate.argv(["sh", "-c", "echo ran > out"]), cwd={str(tmp_path)!r},
                                stdin=gate.stdin, start_new_session=True)
        print(proc.pid, flush=True)
        os._exit(0)  # dies before gate.open
    """)
    done = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text():
        assert time.monotonic() < deadline, "the gated command is still waiting"
        time.sleep(0.02)
    assert not (tmp_path / "out").exists()


def test_a_gate_that_is_closed_lets_nothing_through(tmp_path: Path) -> None:
    gate = Gate()
    proc = subprocess.Popen(gate.argv(["sh", "-c", "echo ran > out"]), cwd=tmp_path, stdin=gate.stdin,
                            start_new_session=True)
    gate.close()
    assert proc.wait(timeout=30) == 125
    assert not (tmp_path / "out").exists()

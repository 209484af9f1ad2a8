"""Issue 25: `lev run -t FILE` reads the file as the upstream does (and `@FILE` still works); a value
that looks like a path with no file behind it is an error, never the task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _task_of(lev, home: Path, *args: str) -> str:
    done = lev("run", "triage", *args, "--model", "mock", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["task"]


def test_a_task_file_by_name_or_with_at(lev, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "task.txt").write_text("the export button does nothing\n")
    assert _task_of(lev, home, "-t", "task.txt") == "the export button does nothing\n"
    assert _task_of(lev, home, "-t", "@task.txt") == "the export button does nothing\n"
    assert _task_of(lev, home, "-t", "classify these/those reports") == "classify these/those reports"
    assert _task_of(lev, home, "--task", "crash") == "crash"


def test_a_missing_task_file_is_an_error(lev, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for value in ("./tsk.txt", "notes/task.md", "~/nowhere-task.txt"):
        done = lev("run", "triage", "-t", value, "--model", "mock")
        assert done.returncode == 2 and "looks like a file, and there is no such file" in done.stderr, done.stderr
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())

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


def test_home_or_root_as_the_workdir_is_refused_unless_allowed(lev, home: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25, [security] allowed_workdirs: a home folder or / as the workdir is refused, once,
    before anything is written, unless the configuration lists it."""
    import lev_nb
    from lev_nb.engine.launch import LaunchError

    fake_home = tmp_path / "person"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    for where, what in ((str(fake_home), "your home folder"), ("/", "the root of the filesystem")):
        done = lev("run", "triage", "-t", "x", "--model", "mock", "--workdir", where)
        assert done.returncode == 2 and what in done.stderr and "allowed_workdirs" in done.stderr, done.stderr
        assert "--workdir" in done.stderr and done.stderr.count("\n") == 1
    with pytest.raises(LaunchError, match="your home folder"):
        lev_nb.load("triage").run("x", model="mock", workdir=fake_home)
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[security]\nallowed_workdirs = ["{fake_home}"]\n')
    done = lev("run", "triage", "-t", "x", "--model", "mock", "--workdir", str(fake_home), "--quiet")
    assert done.returncode == 0, done.stderr
    done = lev("run", "triage", "-t", "x", "--model", "mock", "--workdir", str(fake_home / "project"), "--quiet")
    assert done.returncode == 0, done.stderr  # a folder below home was never alarming


def test_home_reached_by_a_symlink_or_through_a_new_folder_is_still_refused(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The home check compares folders (device and inode) before it resolves paths: a link to home,
    and a folder not made yet whose path climbs back to home, are home all the same."""
    import lev_nb
    from lev_nb.engine.launch import LaunchError

    fake_home = tmp_path / "person"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    link = tmp_path / "link"
    link.symlink_to(fake_home)
    for workdir in (link, fake_home / "not-yet" / "..", tmp_path / "to-root"):
        if workdir.name == "to-root":
            workdir.symlink_to("/")
        with pytest.raises(LaunchError, match="your home folder|the root of the filesystem"):
            lev_nb.load("triage").run("x", model="mock", workdir=workdir, home=tmp_path / "lev")
    run = lev_nb.load("triage").run("x", model="mock", workdir=tmp_path / "project", home=tmp_path / "lev")
    run.wait(60)
    assert run.status == "complete", run.error

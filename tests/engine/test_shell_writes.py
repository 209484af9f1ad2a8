"""A shell redirect is a file write (issue 24): every write form answers to write_file's policy and
to the workdir's confinement, --yolo included; a write with no nameable target is never granted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import call, events_of, say

SHELL = '[stages.work]\navailable_tools = ["shell"]\nnudge = { enabled = false }\n[stages.work.transitions]\n'

# Every form that writes a file (the upstream's tools and configuration pages), aimed outside.
ESCAPING = [
    "echo x > ../outside",
    "echo x >> ../outside",
    "echo x >| ../outside",
    "echo x &> ../outside",
    "echo x &>> ../outside",
    "echo x 2> ../outside",
    "echo x 1>> ../outside",
    "echo x >& ../outside",
    "echo x | tee ../outside",
    "echo x | tee -a ../outside",
    "echo x | tee -- ../outside",
    "echo x > \"../outside\"",
    "echo x > '../outside'",
    "ls && { echo x; } > ../outside",
    "(echo x) > ../outside",
    "for i in 1; do echo x > ../outside; done",
    "if true; then echo x > ../outside; fi",
    "echo $(echo x > ../outside)",
    "cat <(echo x > ../outside)",
    "echo x > OUTSIDE_ABSOLUTE",
    "cat <<EOF > ../outside\nx\nEOF",
]
# Forms whose target has no fixed path: refused when nobody can approve them (yolo or not).
NAMELESS = [
    "echo x > $OUT",
    "echo x > ../*",
    "echo x > ~/outside",
    "echo x > /dev/tcp/127.0.0.1/9",
    "cd .. && echo x > outside",
    "echo x 3<> ../outside",
]


def _shell_result(run) -> str:
    (finished,) = [e for e in events_of(run, "tool_finished") if e.tool == "shell"]
    return finished.summary


@pytest.mark.parametrize("command", ESCAPING)
def test_a_write_outside_the_workdir_is_refused_under_yolo(engine, workdir: Path, command: str) -> None:
    outside = workdir.parent / "outside"
    command = command.replace("OUTSIDE_ABSOLUTE", str(outside))
    run, _ = engine.run(SHELL, [call("shell", command=command), say("ok")], yolo=True)
    assert run.status == "complete", run.error
    assert not outside.exists()
    assert _shell_result(run).startswith("[denied] shell: the command writes to '")


@pytest.mark.parametrize("command", NAMELESS)
def test_a_write_with_no_fixed_target_is_refused_unattended(engine, workdir: Path, command: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUT", str(workdir.parent / "outside"))
    monkeypatch.setenv("HOME", str(workdir.parent))
    run, _ = engine.run(SHELL, [call("shell", command=command), say("ok")], yolo=True)
    assert run.status == "complete", run.error
    assert not (workdir.parent / "outside").exists()
    assert "no fixed path" in _shell_result(run)


@pytest.mark.parametrize("command", ["echo x > inside.txt", "echo x | tee inside.txt", "echo x &>> inside.txt",
                                     "mkdir -p sub; echo x > sub/inside.txt"])
def test_writes_inside_the_workdir_run_under_yolo(engine, workdir: Path, command: str) -> None:
    run, _ = engine.run(SHELL, [call("shell", command=command), say("ok")], yolo=True)
    assert run.status == "complete", run.error
    written = workdir / ("sub/inside.txt" if "sub/" in command else "inside.txt")
    assert written.read_text() == "x\n"


@pytest.mark.parametrize("command", ["ls 2>/dev/null", "ls > /dev/null 2>&1", "ls &> /dev/null", "ls >&2",
                                     "ls 2>&1 | cat", "cat < /etc/hostname > /dev/null"])
def test_discarded_writes_cost_nothing(engine, command: str) -> None:
    # Unattended and not yolo: the default safe list covers these, and a throwaway device is no write.
    run, _ = engine.run(SHELL, [call("shell", command=command), say("ok")], interactive=False)
    assert run.status == "complete", run.error
    assert not _shell_result(run).startswith("[denied]")


def test_a_symlink_out_of_the_workdir_is_refused(engine, workdir: Path) -> None:
    (workdir.parent / "elsewhere").mkdir()
    (workdir / "link").symlink_to(workdir.parent / "elsewhere")
    run, _ = engine.run(SHELL, [call("shell", command="echo x > link/f.txt"), say("ok")], yolo=True)
    assert not (workdir.parent / "elsewhere" / "f.txt").exists()
    assert _shell_result(run).startswith("[denied]")


def test_a_denied_write_file_denies_the_redirect_too(engine, workdir: Path, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[tool_permissions]\nwrite_file = "deny"\nshell = "allow"\n')
    run, _ = engine.run(SHELL, [call("shell", command="echo x > inside.txt"), call("shell", command="echo fine"),
                                say("ok")], yolo=True)
    assert not (workdir / "inside.txt").exists()
    first, second = [e.summary for e in events_of(run, "tool_finished")]
    assert first.startswith("[denied]") and "write_file is not permitted" in first
    assert second == "fine"


def test_a_redirect_is_never_quieter_than_write_file(engine, workdir: Path, home: Path) -> None:
    # The shell is allowed outright; a write through it still asks as write_file does.
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[tool_permissions]\nshell = "allow"\n')
    run, _ = engine.run(SHELL, [call("shell", command="echo x > inside.txt"), say("ok")], interactive=False)
    assert not (workdir / "inside.txt").exists()
    assert "needs a person's approval" in _shell_result(run)


def test_the_cli_refuses_an_escaping_redirect_under_yolo(lev, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "writer"\n' + SHELL)
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([call("shell", command="echo x > ../outside"), say("ok")]))
    out = lev("run", str(agent), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work),
              "--yolo", "--quiet")
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "outside").exists()


def test_script_shell_is_confined_too(tmp_path: Path) -> None:
    from lev_nb.tools.scripts import RunToolHost
    from lev_nb.workspace import Workspace

    work = tmp_path / "w"
    work.mkdir()
    host = RunToolHost(Workspace(work), shell_allowed=True)
    for command in ("echo x > ../outside", "echo x > $OUT"):
        with pytest.raises(PermissionError, match="denied"):
            host.shell(command)
    assert not (tmp_path / "outside").exists()

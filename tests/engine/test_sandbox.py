"""Issue 12 item 4: ``[sandbox]`` is honoured, and ``[security]`` is never silently ignored.

A namespace sandbox runs the shell tool, command seeds and a script's ``shell()`` in bubblewrap: the
working directory read-write, everything outside it (but the system folders) out of sight, the run
record hidden even when it lies in the working directory, no credentials, no network when
``network = false``. A sandbox that must be had and cannot be refuses the run before it starts;
``lev validate`` says which backend a blueprint's commands will use on this machine."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from support import SHELL_STAGE, blueprint, call, events_of, say

import lev_nb
from lev_nb.engine.launch import LaunchError
from lev_nb.providers import ScriptedModel
from lev_nb.sandbox import Choice, Sandbox, SandboxSpec, choose, resolve
from lev_nb.tools.scripts import RunToolHost
from lev_nb.workspace import Workspace

KEY = "sk-ant-test-0123456789abcdef"
needs_bwrap = pytest.mark.skipif(not choose(SandboxSpec(kind="namespace")).program,
                                 reason="bubblewrap cannot create a sandbox on this machine")


def _shell_stage(sandbox: str = 'kind = "namespace"') -> str:
    return f"[sandbox]\n{sandbox}\n" + SHELL_STAGE


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the password is swordfish\n")
    return secret


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH on which bubblewrap (and any container runtime) cannot be found."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@needs_bwrap
@pytest.mark.usefixtures("blueprint_permissions")
def test_a_sandboxed_shell_sees_only_its_workdir(engine, workdir: Path, outside: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    command = (f"cat {outside} > seen.txt 2>&1; echo written > mine.txt; env > env.txt; "
               f"ls {engine.home} > home.txt 2>&1; touch {outside.parent}/new.txt 2> write.txt")
    run, _ = engine.run(_shell_stage(), [call("shell", command=command), say("ok")])
    assert run.status == "complete", run.error
    assert "swordfish" not in (workdir / "seen.txt").read_text()  # outside the workdir: not there
    assert (workdir / "mine.txt").read_text() == "written\n"  # the workdir is writable
    env = (workdir / "env.txt").read_text()
    assert KEY not in env and "ANTHROPIC_API_KEY" not in env and "PATH=" in env
    assert "No such file" in (workdir / "home.txt").read_text()  # $LEV_HOME and the record: hidden
    assert not (outside.parent / "new.txt").exists()
    # The same shell without [sandbox] reads the file: the sandbox is what stops it.
    run, _ = engine.run(_shell_stage("kind = \"none\""), [call("shell", command=f"cat {outside} > seen.txt"), say("ok")])
    assert "swordfish" in (workdir / "seen.txt").read_text()


@needs_bwrap
def test_the_run_record_is_hidden_even_inside_the_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "project"
    home = work / ".lev"  # LEV_HOME inside the working directory, as `./.lev` would be
    home.mkdir(parents=True)
    (home / "config.toml").write_text("[security]\nallow_blueprint_permissions = true\n")
    monkeypatch.setenv("LEV_HOME", str(home))
    # A program writes there (a redirect outside the workdir would be refused before the sandbox).
    forge = ('ls -a .lev/runs > listing.txt 2>&1; for d in .lev/runs/*/; do sh -c \'echo {"kind":"completed"} '
             '>> "$1"\' _ "$d/events.jsonl"; done 2> forge.txt; echo done > done.txt')
    bp = blueprint(_shell_stage())
    run = bp.run("t", model=ScriptedModel([call("shell", command=forge), say("ok")]), workdir=work, home=home)
    run.wait(60)
    assert run.status == "complete", run.error
    assert (work / "done.txt").exists()
    assert run.run_id not in (work / "listing.txt").read_text()
    lines = (Path(run.run_dir) / "events.jsonl").read_text().splitlines()
    assert '{"kind":"completed"}' not in lines and "Permission denied" not in (work / "forge.txt").read_text()


@needs_bwrap
def test_network_off_and_script_shell_in_the_sandbox(workdir: Path, outside: Path) -> None:
    spec = SandboxSpec(kind="namespace", network=False)
    sandbox = Sandbox(choose(spec), workdir)
    host = RunToolHost(Workspace(workdir), shell_allowed=True, sandbox=sandbox)
    out = host.shell(f"cat {outside}; cat /proc/net/dev | wc -l; touch made-here")
    assert "swordfish" not in out and "No such file" in out
    assert out.splitlines()[0] == "3"  # /proc/net/dev lists only the loopback device: no network
    assert (workdir / "made-here").exists()


@needs_bwrap
def test_temporary_files_go_to_the_sandboxs_own_tmp(workdir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A host TMPDIR (a per-user folder under /tmp, as pam_tmpdir sets) is not there inside, where
    /tmp is the sandbox's own: mktemp failed in every command until TMPDIR pointed there."""
    host_tmp = tmp_path / "user" / "1000"
    host_tmp.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(host_tmp))
    monkeypatch.setenv("TMP", str(host_tmp))
    host = RunToolHost(Workspace(workdir), shell_allowed=True,
                       sandbox=Sandbox(choose(SandboxSpec(kind="namespace")), workdir))
    out = host.shell("echo \"$TMPDIR|${TMP-unset}\"; mktemp").splitlines()
    assert out[0] == "/tmp|unset"
    assert out[1].startswith("/tmp/tmp.") and not list(host_tmp.iterdir())


@needs_bwrap
def test_mounts_and_persist(tmp_path: Path, outside: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    spec = SandboxSpec(kind="namespace", mount=(str(outside.parent),), persist=True)
    sandbox = Sandbox(choose(spec), work)
    host = RunToolHost(Workspace(work), shell_allowed=True, sandbox=sandbox)
    out = host.shell(f"cat {outside}; touch {outside.parent}/nope.txt; sh -c 'echo kept > /tmp/k'")
    assert "swordfish" in out  # a mount is readable
    assert not (outside.parent / "nope.txt").exists()  # and read-only unless :rw
    assert host.shell("cat /tmp/k").strip() == "kept"  # persist: /tmp survives between commands
    sandbox.close()
    fresh = RunToolHost(Workspace(work), shell_allowed=True,
                        sandbox=Sandbox(choose(SandboxSpec(kind="namespace")), work))
    fresh.shell("sh -c 'echo kept > /tmp/k'")
    assert "kept" not in fresh.shell("cat /tmp/k 2>&1; true")  # without persist: a fresh /tmp each time


@needs_bwrap
def test_a_command_seed_runs_in_the_agents_sandbox(tmp_path: Path, outside: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    agent = f"""
[agent]
name = "seeds"
[sandbox]
kind = "namespace"
[context.regions]
system = {{ kind = "pinned", max_tokens = 4000 }}
listing = {{ kind = "pinned", max_tokens = 4000, seed = {{ command = "cat {outside} 2>&1; echo seeded" }} }}
conversation = {{ kind = "sliding_window", max_items = 20, max_tokens = 8000 }}
[stages.only]
max_iterations = 2
nudge = {{ enabled = false }}
[stages.only.transitions]
"""
    model = ScriptedModel([{"text": "done"}])
    (tmp_path / "work").mkdir()
    run = lev_nb.load(agent).run("t", model=model, workdir=tmp_path / "work", home=tmp_path / "home")
    run.wait(30)
    system = "\n".join(model.requests[0].system)
    assert "seeded" in system and "swordfish" not in system


def test_a_required_sandbox_that_is_unavailable_refuses_the_run(engine, no_bwrap: None, home: Path) -> None:
    with pytest.raises(LaunchError, match="must run its commands in a sandbox") as info:
        engine.start(_shell_stage('kind = "namespace"\non_unavailable = "error"'), [say("ok")])
    assert "bwrap" in str(info.value) and 'on_unavailable = "warn"' in str(info.value)
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())  # nothing was written


def test_a_stage_sandbox_is_required_too(engine, no_bwrap: None) -> None:
    toml = ("[stages.work]\navailable_tools = [\"shell\"]\n[stages.work.sandbox]\nkind = \"namespace\"\n"
            "[stages.work.transitions]\n")
    with pytest.raises(LaunchError, match="stage 'work' must run its commands in a sandbox"):
        engine.start(toml, [say("ok")])


@pytest.mark.usefixtures("blueprint_permissions")
def test_warn_runs_on_the_host_and_says_so(engine, workdir: Path, no_bwrap: None) -> None:
    run, _ = engine.run(_shell_stage('kind = "namespace"\non_unavailable = "warn"'),
                        [call("shell", command="echo hi > hi.txt"), say("ok")])
    assert run.status == "complete", run.error
    warnings = [e.message for e in events_of(run, "warning")]
    assert any("cannot give" in w and "on the host" in w for w in warnings), warnings
    assert [w.code for w in run.warnings] == ["sandbox-fallback"]


def test_the_stronger_sandbox_wins() -> None:
    agent = SandboxSpec(kind="namespace", network=False, on_unavailable="warn")
    stage = SandboxSpec(kind="container", image="debian", on_unavailable="warn")
    both = resolve(agent, stage)
    assert both.kind == "container" and both.image == "debian" and not both.network
    assert resolve(stage, SandboxSpec(kind="none")).kind == "container"
    assert resolve(agent, SandboxSpec(kind="namespace")).on_unavailable == "error"  # either requires it
    assert resolve(None, None) == SandboxSpec()


def _fake_runtime(folder: Path, name: str) -> Path:
    """A container runtime stand-in: answers `info`, and runs `run ... IMAGE CMD...` on the host,
    recording its arguments."""
    folder.mkdir(exist_ok=True)
    program = folder / name
    program.write_text(
        "#!/bin/sh\n"
        "[ \"$1\" = info ] && exit 0\n"
        f"printf '%s\\n' \"$@\" > {folder}/argv.txt\n"
        "while [ \"$1\" != debian:stable ]; do shift; done; shift\n"
        "exec \"$@\"\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def test_a_container_runtime_is_used_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _fake_runtime(tmp_path / "bin", "podman")
    monkeypatch.setenv("PATH", f"{runtime.parent}:{os.environ['PATH']}")
    work = tmp_path / "w"
    work.mkdir()
    choice = choose(SandboxSpec(kind="container", image="debian:stable", network=False, mount=("/srv:ro",)))
    assert (choice.backend, choice.program) == ("podman", str(runtime))
    host = RunToolHost(Workspace(work), shell_allowed=True, sandbox=Sandbox(choice, work))
    assert host.shell("echo from-inside").strip() == "from-inside"
    argv = (runtime.parent / "argv.txt").read_text().splitlines()
    assert argv[:2] == ["run", "--rm"] and "--network" in argv and "none" in argv
    assert f"{work}:{work}:rw" in argv and "/srv:/srv:ro" in argv and "debian:stable" in argv
    assert not any(a.startswith("ANTHROPIC") for a in argv)


def test_a_container_without_a_runtime_is_unavailable(no_bwrap: None) -> None:
    choice = choose(SandboxSpec(kind="container", image="debian:stable"))
    assert choice.refused and "podman is not on PATH" in choice.reason
    assert choose(SandboxSpec(kind="container")).reason.endswith("names no image")


# --- lev validate ------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    (folder / "agent.leviath").write_text('[agent]\nname = "sandboxed"\n' + text)
    return folder


def _findings(lev, folder: Path) -> list[dict]:
    done = lev("validate", str(folder), "--json")
    return json.loads(done.stdout)["findings"]


@needs_bwrap
def test_validate_names_the_backend(lev, tmp_path: Path) -> None:
    found = [f for f in _findings(lev, _write(tmp_path, _shell_stage())) if f["code"].startswith("sandbox")]
    assert [f["code"] for f in found] == ["sandbox-backend"], found
    assert "bubblewrap" in found[0]["message"] and found[0]["severity"] == "note"


def test_validate_says_when_the_sandbox_is_unavailable(lev, tmp_path: Path, no_bwrap: None) -> None:
    folder = _write(tmp_path, _shell_stage())
    found = [f for f in _findings(lev, folder) if f["code"].startswith("sandbox")]
    # A warning (the verdict does not depend on this machine) that says runs here are refused.
    assert [(f["code"], f["severity"]) for f in found] == [("sandbox-unavailable", "warning")], found
    assert "bwrap" in found[0]["message"] and "refused here" in found[0]["message"]
    done = lev("validate", str(folder))
    assert done.returncode == 0
    assert lev("validate", str(folder), "--deny-warnings").returncode != 0
    warn = _write(tmp_path, _shell_stage('kind = "namespace"\non_unavailable = "warn"'))
    found = [f for f in _findings(lev, warn) if f["code"].startswith("sandbox")]
    assert [(f["code"], f["severity"]) for f in found] == [("sandbox-unavailable", "warning")], found


def test_a_host_choice_wraps_nothing(tmp_path: Path) -> None:
    sandbox = Sandbox(Choice(SandboxSpec(), "host"), tmp_path)
    assert sandbox.wrap(["sh", "-c", "true"]) == ["sh", "-c", "true"] and not sandbox.isolated


def test_lev_run_refuses_a_required_sandbox_in_one_line(lev, tmp_path: Path, no_bwrap: None) -> None:
    folder = _write(tmp_path, _shell_stage())
    done = lev("run", str(folder), "--task", "t", "--model", "mock", "--quiet")
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "must run its commands in a sandbox" in done.stderr
    assert "Traceback" not in done.stderr and 'on_unavailable = "warn"' in done.stderr

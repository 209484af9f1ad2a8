"""Issue 26, the first hole: a blueprint's ``[sandbox] mount`` could show ``$LEV_HOME`` read-write.

With ``mount = ["/:/host:ro", "<LEV_HOME>:/x:rw"]`` the sandboxed shell read a file outside the workdir
and appended to ``config.toml``. Now, whatever ``mount`` says, ``$LEV_HOME``, the run records and the
configuration stay hidden (covered inside every mount that holds them; a mount *of* them refused), a
mount outside the workdir needs the user's grant (``[security] sandbox_mounts``, or a read grant for
a read-only one), and ``lev validate`` says exactly what the sandbox will show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import call, say

import lev_nb
from lev_nb.engine.launch import LaunchError
from lev_nb.providers import ScriptedModel
from lev_nb.sandbox import Sandbox, SandboxError, SandboxSpec, choose, mount_problems, parse_mount

needs_bwrap = pytest.mark.skipif(not choose(SandboxSpec(kind="namespace")).program,
                                 reason="bubblewrap cannot create a sandbox on this machine")


def _agent(mounts: list[str]) -> str:
    listed = ", ".join(json.dumps(m) for m in mounts)
    return (f'[agent]\nname = "mounter"\n[sandbox]\nkind = "namespace"\nmount = [{listed}]\n'
            '[stages.work]\navailable_tools = ["shell"]\ntool_permissions = { shell = "allow", write_file = "allow" }\n'
            "[stages.work.transitions]\n")


def _config(home: Path, extra: str = "") -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text("[security]\nallow_blueprint_permissions = true\n" + extra)
    return path


def _run(toml: str, command: str, work: Path, home: Path):
    bp = lev_nb.load(toml)
    run = bp.run("t", model=ScriptedModel([call("shell", command=command), say("ok")]), workdir=work, home=home)
    run.wait(60)
    return run


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A LEV_HOME with a config and a run store, a workdir, and a secret outside both."""
    home = tmp_path / "levhome"
    work = tmp_path / "project"
    work.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("swordfish\n")
    monkeypatch.setenv("LEV_HOME", str(home))
    return home, work, outside


def test_the_reported_attack_is_refused_before_anything_runs(place) -> None:
    home, work, _ = place
    config = _config(home, 'sandbox_mounts = ["/:rw"]\n')  # even a user who grants everything
    before = config.read_text()
    with pytest.raises(LaunchError) as info:
        _run(_agent(["/:/host:ro", f"{home}:/x:rw"]), "echo pwned >> /x/config.toml", work, home)
    message = str(info.value)
    assert f"mount '{home}:/x:rw' would show {home.resolve()}" in message, message
    assert "can never be mounted" in message
    assert config.read_text() == before
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())  # nothing was written


def test_a_mount_outside_the_workdir_needs_a_grant(place) -> None:
    home, work, outside = place
    _config(home)
    with pytest.raises(LaunchError, match="does not grant it") as info:
        _run(_agent([f"{outside}:/data"]), "cat /data/secret.txt", work, home)
    assert "sandbox_mounts" in str(info.value)
    # Read-only grants do not let it be written.
    _config(home, f'sandbox_mounts = ["{outside}"]\n')
    with pytest.raises(LaunchError, match=r"read-write\), outside the working directory"):
        _run(_agent([f"{outside}:/data:rw"]), "true", work, home)


@needs_bwrap
def test_a_granted_root_mount_shows_the_host_but_never_lev_home_or_the_config(
        place, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work, outside = place
    elsewhere_config = tmp_path / "cfg" / "lev.toml"  # LEV_CONFIG outside LEV_HOME is hidden too
    elsewhere_config.parent.mkdir()
    elsewhere_config.write_text("[security]\nallow_blueprint_permissions = true\nsandbox_mounts = [\"/\"]\n")
    monkeypatch.setenv("LEV_CONFIG", str(elsewhere_config))
    command = (f"cat /host{outside}/secret.txt > seen.txt; ls -a /host{home} > home.txt 2>&1; "
               f"cat /host{elsewhere_config} > config.txt 2>&1; "
               # A program, not a redirect: a redirect outside the workdir is refused before it runs.
               f"echo pwned | dd of=/host{elsewhere_config} oflag=append conv=notrunc 2> append.txt; "
               "echo ok > done.txt")
    run = _run(_agent(["/:/host:ro"]), command, work, home)
    assert run.status == "complete", run.error
    assert (work / "done.txt").exists()
    assert (work / "seen.txt").read_text() == "swordfish\n"  # the grant is honoured
    listing = (work / "home.txt").read_text().split()
    assert run.run_id not in listing and "config.toml" not in listing and "runs" not in listing, listing
    assert "sandbox_mounts" not in (work / "config.txt").read_text()
    assert "pwned" not in elsewhere_config.read_text()


@needs_bwrap
def test_a_rw_mount_holding_lev_home_cannot_write_into_it(place, tmp_path: Path) -> None:
    home, _, _ = place
    parent = tmp_path  # holds LEV_HOME (tmp_path/levhome) and the workdir
    work = tmp_path / "project"
    config = _config(home, f'sandbox_mounts = ["{parent}:rw"]\n')
    # Programs, not redirects: a redirect outside the workdir is refused before it runs.
    command = ("echo pwned | dd of=/m/levhome/config.toml oflag=append conv=notrunc 2> w.txt; "
               "mkdir -p /m/levhome/runs/forged 2>> w.txt; "
               "echo new | dd of=/m/elsewhere/new.txt 2>> w.txt; echo ok > done.txt")
    run = _run(_agent([f"{parent}:/m:rw"]), command, work, home)
    assert run.status == "complete", run.error
    assert (work / "done.txt").exists()
    assert "pwned" not in config.read_text()
    assert not (home / "runs" / "forged").exists()
    assert (tmp_path / "elsewhere" / "new.txt").read_text() == "new\n"  # the rest of the grant works


def test_a_link_cannot_disguise_lev_home(place, tmp_path: Path) -> None:
    home, work, _ = place
    _config(home, 'sandbox_mounts = ["/:rw"]\n')
    link = tmp_path / "innocent"
    link.symlink_to(home / "runs", target_is_directory=True)
    (home / "runs").mkdir()
    with pytest.raises(LaunchError, match="would show"):
        _run(_agent([f"{link}:/data:ro"]), "true", work, home)
    # A relative mount that climbs out of the workdir into LEV_HOME is refused the same way.
    inside = home / "work"
    inside.mkdir()
    with pytest.raises(LaunchError, match="would show"):
        _run(_agent(["..:/up"]), "true", inside, home)


@needs_bwrap
def test_a_mount_inside_the_workdir_and_the_default_workdir(place, tmp_path: Path) -> None:
    home, work, outside = place
    _config(home, f'sandbox_mounts = ["{outside}"]\n')
    run = _run(_agent([f"{outside}:data"]), "cat data/secret.txt > seen.txt", work, home)
    assert run.status == "complete", run.error
    assert (work / "seen.txt").read_text() == "swordfish\n"  # a target in the workdir shows through it
    # No workdir: the run's own folder under LEV_HOME; a granted mount of / still hides LEV_HOME.
    _config(home, 'sandbox_mounts = ["/"]\n')
    bp = lev_nb.load(_agent(["/:/host:ro"]))
    command = f"ls /host{home}/runs > listing.txt 2>&1; echo ok > done.txt"
    run = bp.run("t", model=ScriptedModel([call("shell", command=command), say("ok")]), home=home)
    run.wait(60)
    assert run.status == "complete", run.error
    assert (Path(run.workdir) / "done.txt").exists()
    assert run.run_id not in (Path(run.workdir) / "listing.txt").read_text()


def test_the_wrapper_refuses_even_without_the_launch_check(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    spec = SandboxSpec(kind="namespace", mount=(f"{home}:/x:rw",))
    sandbox = Sandbox(choose(spec), tmp_path / "w", hidden=(home,))
    if sandbox.isolated:
        with pytest.raises(SandboxError, match="would show"):
            sandbox.wrap(["true"])
    assert mount_problems(SandboxSpec(kind="namespace", mount=("/:/",)), tmp_path, ()) == [
        "mount '/:/' would replace the whole filesystem of the sandbox"]
    assert parse_mount("data:rw", tmp_path).target == tmp_path / "data"


def test_validate_says_what_the_sandbox_will_show(lev, tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.leviath").write_text(_agent(["/srv/data:/data", f"{home}:/x:rw"]))
    done = lev("validate", str(folder), "--json")
    findings = json.loads(done.stdout)["findings"]
    shown = [f for f in findings if f["code"] == "sandbox-backend"]
    if shown:  # bubblewrap is here: the note lists every mount and what stays hidden
        assert "/srv/data at /data read-only" in shown[0]["message"]
        assert "$LEV_HOME" in shown[0]["message"]
    refused = [f for f in findings if f["code"] == "sandbox-mount-refused"]
    assert len(refused) == 2, findings
    assert any("does not grant it" in f["message"] for f in refused)
    assert any("would show" in f["message"] for f in refused)
    assert all(f["severity"] == "warning" and "sandbox_mounts" in f["fix"] for f in refused)


# --- the machine-wide [sandbox] of config.toml (issue 25) ---------------------------------------


def test_the_machine_sandbox_is_a_floor_a_blueprint_cannot_lower() -> None:
    from lev_nb.sandbox import under

    floor = SandboxSpec(kind="namespace", network=False, mount=("/opt/tools",), engine="podman")
    assert under(SandboxSpec(), floor) == SandboxSpec(kind="namespace", network=False, mount=("/opt/tools",),
                                                      engine="podman", on_unavailable="error")
    stronger = under(SandboxSpec(kind="container", image="debian", mount=("/srv",), engine="docker"), floor)
    assert stronger.kind == "container" and stronger.mount == ("/srv",) and stronger.engine == "podman"
    assert not stronger.network  # network only when both allow it
    assert under(SandboxSpec(kind="namespace"), SandboxSpec()) == SandboxSpec(kind="namespace")


@needs_bwrap
def test_a_configured_sandbox_holds_a_blueprint_that_asks_for_none(place, tmp_path: Path) -> None:
    home, work, outside = place
    tools = tmp_path / "toolchain"
    tools.mkdir()
    (tools / "VERSION").write_text("1.2\n")
    _config(home, f'[sandbox]\nkind = "namespace"\nnetwork = false\nmounts = ["{tools}:/mnt/toolchain:ro"]\n')
    toml = ('[agent]\nname = "open"\n[sandbox]\nkind = "none"\n[stages.work]\navailable_tools = ["shell"]\n'
            'tool_permissions = { shell = "allow", write_file = "allow" }\n[stages.work.transitions]\n')
    command = (f"cat {outside}/secret.txt > seen.txt 2>&1; cat /opt/toolchain/VERSION > tool.txt; "
               "cat /proc/net/dev | wc -l > net.txt")
    command = command.replace("/opt/toolchain", "/mnt/toolchain")
    run = _run(toml, command, work, home)
    assert run.status == "complete", run.error
    assert "swordfish" not in (work / "seen.txt").read_text()  # the blueprint's "none" did not lower it
    assert (work / "tool.txt").read_text() == "1.2\n"  # the machine's own mount needs no extra grant
    assert (work / "net.txt").read_text().strip() == "3"  # loopback only
    # A mount point cannot be made inside the read-only system folders: refused before the run.
    _config(home, f'[sandbox]\nkind = "namespace"\nmounts = ["{tools}:/opt/lev-no-such-folder"]\n')
    with pytest.raises(LaunchError, match="inside /opt, which is read-only in the sandbox"):
        _run(toml, "true", work, home)


def test_a_misspelt_machine_sandbox_is_an_error(tmp_path: Path) -> None:
    from lev_nb.settings import ConfigError, load

    path = tmp_path / "config.toml"
    path.write_text('[sandbox]\nkind = "namesapce"\n')
    with pytest.raises(ConfigError, match="not one of none, namespace, container") as info:
        load(path)
    assert info.value.hint == "did you mean 'namespace'?" and info.value.line == 2

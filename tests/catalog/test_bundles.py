"""Issue 25: `lev pack`, `lev add`, `lev remove`, `lev create` and the upstream's .leviath-bundle.

A bundle is the upstream's format (a gzip tarball of the agent folder, agent.leviath at its top), so
one made by either tool installs in the other; credential-shaped files never go in; installing a
hostile archive writes nothing outside $LEV_HOME/agents/<name> and leaves a previous install as it was."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

import lev_nb
from lev_nb.catalog import bundles
from lev_nb.catalog.bundles import BundleError, install, pack


def _agent(folder: Path, name: str = "helper", extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.leviath").write_text(
        f'[agent]\nname = "{name}"\nversion = "1.2.3"\ndescription = "packs"\n{extra}'
        '[stages.only]\nmode = "output"\noutput = { format = "text" }\n')
    return folder


def _tarball(entries: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return buffer.getvalue()


MANIFEST = (b'[agent]\nname = "helper"\nversion = "1.0.0"\n'
            b'[stages.only]\nmode = "output"\noutput = { format = "text" }\n')


def test_pack_add_run_remove(lev, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _agent(tmp_path / "src" / "helper")
    (folder / "tools").mkdir()
    (folder / "tools" / "note.rhai").write_text('// a tool\nfn run(args) { "ok" }\n')
    for secret in (".env", ".env.staging", "id_rsa", "server.pem", "config.toml"):
        (folder / secret).write_text("SECRET=swordfish\n")
    (folder / ".ssh").mkdir()
    (folder / ".ssh" / "known_hosts").write_text("swordfish")
    (folder / "link.txt").symlink_to(tmp_path / "outside.txt")
    (tmp_path / "outside.txt").write_text("swordfish")
    monkeypatch.chdir(tmp_path)
    done = lev("pack", str(folder))
    assert done.returncode == 0, done.stderr
    bundle = tmp_path / "helper-1.2.3.leviath-bundle"
    assert bundle.is_file()
    left_out = done.stdout.split("Left out: ")[1].splitlines()[0].split(", ")
    assert sorted(left_out) == [".env", ".env.staging", ".ssh/", "config.toml", "id_rsa",
                                "link.txt (a link: not followed)", "server.pem"], left_out
    with tarfile.open(bundle, "r:gz") as tar:
        names = sorted(tar.getnames())
    assert names == ["agent.leviath", "tools/note.rhai"], names  # the upstream's layout, no secret
    assert bundle.read_bytes() == pack(folder, tmp_path / "again.leviath-bundle").path.read_bytes()  # reproducible
    done = lev("add", str(bundle))
    assert done.returncode == 0, done.stderr
    assert "Installed agent 'helper' v1.2.3" in done.stdout
    assert "ships 1 script tool(s) that run code: note.rhai" in done.stdout
    installed = home / "agents" / "helper"
    assert sorted(p.name for p in installed.rglob("*")) == ["agent.leviath", "note.rhai", "tools"]
    run = lev("run", "helper", "--model", "mock", "--quiet", "--workdir", str(tmp_path / "w"))
    assert run.returncode == 0, run.stderr
    again = lev("add", str(folder))  # a folder installs too, replacing the bundle's install
    assert again.returncode == 0 and "Replaced agent 'helper'" in again.stdout
    assert not (installed / ".env").exists()
    assert lev("remove", "helper").returncode == 0 and not installed.exists()
    gone = lev("remove", "helper")
    assert gone.returncode == 1 and "no agent 'helper' is installed" in gone.stderr


def test_a_bundle_as_the_upstream_writes_it_installs(home: Path, tmp_path: Path) -> None:
    """The upstream's bundler adds each file under its path relative to the agent folder, with no
    folder entries; a `scripts/` folder and docs come along as they are."""
    data = _tarball([("agent.leviath", MANIFEST), ("scripts/setup.rhai", b"let x = 1;\n"), ("README.md", b"# hi\n")])
    package = tmp_path / "helper-1.0.0.leviath-bundle"
    package.write_bytes(data)
    done = install(package)
    assert done.name == "helper" and done.version == "1.0.0" and not done.replaced
    assert (home / "agents" / "helper" / "scripts" / "setup.rhai").read_text() == "let x = 1;\n"
    assert lev_nb.load("helper").agent.version == "1.0.0"


@pytest.mark.parametrize("entry, why", [
    (("../escape.txt", b"x"), "outside the agent's folder"),
    (("/etc/evil", b"x"), "outside the agent's folder"),
    ("symlink", "not a regular file or folder"),
    ("hardlink", "not a regular file or folder"),
    ("fifo", "not a regular file or folder"),
])
def test_a_hostile_bundle_installs_nothing(home: Path, tmp_path: Path, entry: object, why: str) -> None:
    _agent(home / "agents" / "helper", extra="# the previous install\n")
    before = (home / "agents" / "helper" / "agent.leviath").read_text()
    if isinstance(entry, str):
        info = tarfile.TarInfo("tools/x.rhai")
        info.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[entry]
        info.linkname = "/etc/passwd"
        entries: list = [("agent.leviath", MANIFEST), info]
    else:
        entries = [("agent.leviath", MANIFEST), entry]
    package = tmp_path / "bad.leviath-bundle"
    package.write_bytes(_tarball(entries))
    with pytest.raises(BundleError, match=why):
        install(package)
    assert (home / "agents" / "helper" / "agent.leviath").read_text() == before
    assert not (tmp_path / "escape.txt").exists()
    assert sorted(p.name for p in (home / "agents").iterdir()) == ["helper"]  # no staging left behind


def test_broken_bundles_say_what_is_wrong(lev, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = {
        "plain.leviath-bundle": (b"just text", "not a .leviath-bundle"),
        "empty.leviath-bundle": (_tarball([("README.md", b"hi")]), "no agent.leviath at its top"),
        "broken.leviath-bundle": (_tarball([("agent.leviath", b"[agent\nname=")]), "the agent does not load"),
        "unsafe.leviath-bundle": (_tarball([("agent.leviath", MANIFEST.replace(b'"helper"', b'"a b"'))]),
                                  "cannot name a folder"),
    }
    for name, (data, why) in cases.items():
        (tmp_path / name).write_bytes(data)
        done = lev("add", str(tmp_path / name))
        assert done.returncode == 1 and why in done.stderr, (name, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    missing = lev("add", str(tmp_path / "nope.leviath-bundle"))
    assert missing.returncode == 1 and "neither an agent folder nor a .leviath-bundle" in missing.stderr
    monkeypatch.setattr(bundles, "MAX_UNPACKED_BYTES", 1000)
    (tmp_path / "big.leviath-bundle").write_bytes(_tarball([("agent.leviath", MANIFEST), ("data.bin", b"0" * 5000)]))
    done = lev("add", str(tmp_path / "big.leviath-bundle"))
    assert done.returncode == 1 and "unpacks to more than" in done.stderr
    assert not (home / "agents" / "helper").exists()


def test_add_shows_what_an_agent_asks_for(lev, home: Path, tmp_path: Path) -> None:
    folder = _agent(tmp_path / "greedy", "greedy", extra=(
        '[tool_permissions]\nshell = "allow"\n[read_paths]\nallow = ["~/notes"]\n'
        '[sandbox]\nkind = "namespace"\nmount = ["/srv/data"]\n'
        '[context.regions]\nlisting = { kind = "pinned", max_tokens = 100, seed = { command = "ls ~" } }\n'))
    done = lev("add", str(folder))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "pre-approves these tools (no question at run time): shell" in out
    assert "asks to read outside its workdir: ~/notes; 1 declared, 0 granted" in out
    assert "asks its sandbox to show host paths: /srv/data" in out
    assert "runs this command when it starts, before any prompt: `ls ~`" in out
    assert "lev validate greedy" in out


@pytest.mark.parametrize("template", ["default", "coder"])
def test_create_gives_an_agent_that_validates_and_runs(lev, home: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, template: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")  # a key is there: no no-reachable-provider
    done = lev("create", "my-agent", "--template", template)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "my-agent").iterdir()) == [".env.example", ".gitignore", "agent.leviath"]
    report = json.loads(lev("validate", "my-agent", "--json").stdout)
    assert [f for f in report["findings"] if f["severity"] != "note"] == [], report["findings"]
    run = lev("run", "my-agent", "--task", "add a greeting file", "--model", "mock", "--quiet",
              "--workdir", str(tmp_path / "w"))
    assert run.returncode == 0, run.stderr
    assert lev("create", "my-agent").returncode == 1  # never over an existing folder
    bad = lev("create", "x", "--template", "codr")
    assert bad.returncode == 1 and "did you mean 'coder'" in bad.stderr

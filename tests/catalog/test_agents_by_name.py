"""Issue 25: an agent is found by name from any folder, and after a wheel install.

`lev run triage`, `lev validate triage` and `lev_nb.load("triage")` work outside the checkout; a
name is looked up in $LEV_HOME/agents, then the configuration's agent_paths, then the bundled
agents (the first wins); a misspelt name gets a "did you mean"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import lev_nb
from lev_nb.blueprint import BlueprintError
from lev_nb.catalog import find_agent, list_agents

ROOT = Path(__file__).resolve().parents[2]


def _agent(folder: Path, name: str, description: str = "mine") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.leviath").write_text(
        f'[agent]\nname = "{name}"\nversion = "2.0.0"\ndescription = "{description}"\n'
        '[stages.only]\nmode = "output"\noutput = { format = "text" }\n')
    return folder


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current folder outside the checkout."""
    folder = tmp_path / "empty"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_a_bundled_agent_by_name_from_an_empty_folder(lev, home: Path, elsewhere: Path) -> None:
    assert lev_nb.load("triage").agent.name == "triage"
    done = lev("validate", "triage")
    assert done.returncode == 0 and "'triage' is valid" in done.stdout, done.stderr
    done = lev("run", "triage", "--task", "the app crashes on save", "--model", "mock", "--quiet")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("triage-")
    assert lev_nb.validate("triage").valid
    assert not list(elsewhere.iterdir())  # nothing written into the current folder


def test_a_misspelt_name_says_where_it_looked_and_what_is_close(lev, home: Path, elsewhere: Path) -> None:
    with pytest.raises(BlueprintError, match="did you mean 'triage'") as info:
        lev_nb.load("traige")
    assert "$LEV_HOME/agents" in str(info.value) and "agent_paths" in str(info.value)
    for command in (("validate", "traige"), ("run", "traige", "--model", "mock"), ("graph", "traige")):
        done = lev(*command)
        assert done.returncode != 0 and "did you mean 'triage'" in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    # A path that does not exist is still named as a path, not looked up.
    done = lev("validate", "./nowhere")
    assert "no such file or folder" in done.stderr


def test_installed_then_configured_then_bundled(home: Path, tmp_path: Path, elsewhere: Path) -> None:
    _agent(home / "agents" / "triage", "triage", "installed over the bundled one")
    (home / "config.toml").write_text('agent_paths = ["mine", "~/nowhere-at-all"]\n')
    _agent(home / "mine" / "helper", "helper", "from agent_paths, relative to config.toml")
    _agent(home / "mine" / "triage", "triage", "hidden by the installed one")
    assert lev_nb.load("triage").agent.description == "installed over the bundled one"
    entry = find_agent("helper")
    assert entry is not None and entry.source == "configured"
    assert lev_nb.load("helper").agent.description.startswith("from agent_paths")
    sources = [(e.name, e.source) for e in list_agents() if e.name in ("triage", "helper")]
    assert sources == [("triage", "installed"), ("helper", "configured"), ("triage", "configured"),
                       ("triage", "bundled")]
    # A name never reaches other folders.
    assert find_agent("../agents/triage") is None and find_agent("..") is None


def test_lev_list(lev, home: Path, elsewhere: Path) -> None:
    _agent(home / "agents" / "triage", "triage", "installed over the bundled one")
    _agent(elsewhere, "here")
    done = lev("list")
    assert done.returncode == 0
    text = done.stdout
    assert "Installed" in text and "In this folder" in text and "Bundled with lev_nb" in text
    assert "triage (v2.0.0) - installed over the bundled one" in text
    assert "triage (v0.1.0)" in text and "hidden by the one above" in text
    listing = json.loads(lev("list", "--json").stdout)
    assert {(a["name"], a["source"]) for a in listing["agents"]} == {("triage", "installed"), (".", "local")}
    assert "research-brief" in {b["name"] for b in listing["bundled"]}
    only = json.loads(lev("list", "--json", "--filter", "blueprints").stdout)
    assert only["agents"] == [] and only["bundled"]
    bad = lev("list", "--filter", "agnts")
    assert bad.returncode == 2 and "did you mean 'agents'" in bad.stderr


def test_a_fan_out_worker_is_found_in_agent_paths(home: Path, tmp_path: Path) -> None:
    from lev_nb.engine.pipeline.fanout import find_agent as find_worker
    from lev_nb.engine.plan.build import plan_from_blueprint

    extra = tmp_path / "team"
    _agent(extra / "worker-x", "worker-x")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'agent_paths = ["{extra}"]\n')
    plan = plan_from_blueprint(lev_nb.load("triage"))
    assert find_worker(plan, "worker-x") == extra / "worker-x" / "agent.leviath"


@pytest.mark.skipif(shutil.which("cargo") is None, reason="building a wheel needs a Rust toolchain")
def test_a_wheel_runs_a_bundled_agent_from_an_empty_folder(tmp_path: Path) -> None:
    """The wheel carries the bundled agents and the native module: installed on its own (no
    checkout on sys.path), `lev run triage` works from an empty folder."""
    maturin = shutil.which("maturin", path=str(Path(sys.executable).parent))
    if maturin is None:
        pytest.skip("maturin is not installed in this environment")
    wheels = tmp_path / "wheels"
    subprocess.run([maturin, "build", "--release", "--quiet", "-o", str(wheels)], cwd=ROOT, check=True,
                   capture_output=True, timeout=1500)
    (wheel,) = wheels.glob("lev_nb-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("LEV_CONFIG", "PYTHONPATH")}
    env.update(PYTHONPATH=str(site), LEV_HOME=str(tmp_path / "home"), PYTHONSAFEPATH="1")
    where = subprocess.run([sys.executable, "-c", "import lev_nb; print(lev_nb.__file__)"], cwd=empty, env=env,
                           capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(site)), where.stdout
    done = subprocess.run([sys.executable, "-m", "lev_nb.cli", "run", "triage", "--task", "crash on save",
                           "--model", "mock", "--quiet"], cwd=empty, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("triage-")
    assert not list(empty.iterdir())

"""``lev config`` (the effective settings and their sources), ``lev -c KEY=VALUE``, and ``lev validate`` under
the user's configuration; each runs in this process with a private LEV_HOME (the ``lev`` fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import Lev

READS = """
[agent]
name = "cto"

[stages.work]
mode = "autonomous"
model = { models = [{ provider = "anthropic", model = "claude-sonnet-4-6" }] }
max_iterations = 3

[read_paths]
allow = ["/data/runs"]
"""


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text)
    return path


def line_of(out: str, key: str) -> str:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(f"{key} = ")]
    return line


def test_config_lists_every_value_with_its_source(lev: Lev, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config(home, '[limits]\nmax_concurrent_inferences = 3\n\n[agent_read_paths.cto]\nallow = ["~/x"]\n')
    monkeypatch.setenv("LEV_DEFAULT_MAX_ITERATIONS", "20")
    proc = lev("-c", "notebook.model=mock", "config")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"# configuration file: {path}\n")
    assert "launch option (-c) > session (lev_nb.configure) > environment > config.toml > default" in out
    assert line_of(out, "limits.max_concurrent_inferences").endswith(f"# {path}:2")
    assert line_of(out, "limits.default_max_iterations").endswith("# env LEV_DEFAULT_MAX_ITERATIONS")
    assert line_of(out, "notebook.model").endswith("# launch option (-c)")
    assert line_of(out, "agent_read_paths.cto.allow").split("#")[0].strip() == 'agent_read_paths.cto.allow = ["~/x"]'
    assert line_of(out, "default_model").split("#")[0].strip() == "default_model = (unset)"
    assert line_of(out, "limits.interaction_timeout_secs").endswith("# default")


def test_config_without_a_file(lev: Lev, home: Path) -> None:
    proc = lev("config")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0] == f"# configuration file: {home / 'config.toml'} (not found: built-in defaults apply)"


def test_config_json(lev: Lev, home: Path) -> None:
    path = write_config(home, '[security]\nread_paths = ["/srv"]\n')
    data = json.loads(lev("config", "--json").stdout)
    assert set(data) == {"path", "exists", "settings", "sources"}
    assert data["path"] == str(path) and data["exists"] is True
    assert data["settings"]["security"]["read_paths"] == ["/srv"]
    assert data["settings"]["limits"]["default_max_iterations"] == 50
    assert data["sources"]["security.read_paths"] == {"kind": "file", "label": f"{path}:2", "path": str(path), "line": 2}
    assert data["sources"]["limits.default_max_iterations"] == {"kind": "default", "label": "default"}


@pytest.mark.parametrize("args", [("config", "path"), ("config", "--path")])
def test_config_path(lev: Lev, home: Path, args: tuple[str, ...]) -> None:
    proc = lev(*args)
    assert proc.returncode == 0 and proc.stdout == f"{home / 'config.toml'}\n"


@pytest.mark.parametrize("args", [("config",), ("models", "list"), ("mcp", "list")])
def test_a_malformed_file_is_one_located_error_line(lev: Lev, home: Path, args: tuple[str, ...]) -> None:
    path = write_config(home, '[limits]\nmax_concurrent_inferences = "four"\n')
    proc = lev(*args)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"Error: {path}:2:1: limits.max_concurrent_inferences: expected a whole number, "
                           "got a string ('four')\n")


def test_a_misspelt_key_is_one_warning_and_the_file_loads(lev: Lev, home: Path) -> None:
    path = write_config(home, "[limits]\nmax_concurrent_inference = 4\n")
    proc = lev("config")
    assert proc.returncode == 0
    assert proc.stderr == (f"lev: warning: {path}:2: unknown key 'limits.max_concurrent_inference' is ignored "
                           "(did you mean 'max_concurrent_inferences'?)\n")


def test_a_misspelt_launch_option_is_a_usage_error(lev: Lev, home: Path) -> None:
    proc = lev("-c", "limits.max_concurent_inferences=2", "config")
    assert proc.returncode == 2
    assert proc.stderr.startswith("lev: error: the -c option: limits.max_concurent_inferences: unknown key")
    assert "did you mean 'max_concurrent_inferences'?" in proc.stderr


# ------------------------------------------------------------------------------------------------
# lev validate reads the grants
# ------------------------------------------------------------------------------------------------
def agent(tmp_path: Path) -> str:
    folder = tmp_path / "cto"
    folder.mkdir()
    (folder / "agent.leviath").write_text(READS)
    return str(folder)


def test_validate_warns_about_ungranted_read_paths(lev: Lev, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # a reachable provider: no-reachable-provider is not tested here
    folder = agent(tmp_path)
    proc = lev("validate", "--json", folder)
    assert proc.returncode == 0
    codes = [(f["code"], f["severity"]) for f in json.loads(proc.stdout)["findings"]]
    assert codes == [("read-paths-not-granted", "warning"), ("read-paths-declared", "note")]
    strict = lev("validate", "--deny-warnings", folder)
    assert strict.returncode == 1 and "1 warning (--deny-warnings)" in strict.stderr


def test_validate_with_the_grant(lev: Lev, home: Path, tmp_path: Path) -> None:
    write_config(home, '[agent_read_paths.cto]\nallow = ["/data"]\n')
    proc = lev("validate", agent(tmp_path))
    assert proc.returncode == 0 and "[read-paths-not-granted]" not in proc.stdout
    assert "1 declared, 1 granted [read-paths-declared]" in proc.stdout


def test_validate_with_a_grant_given_at_launch(lev: Lev, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # a reachable provider: no-reachable-provider is not tested here
    proc = lev("-c", 'security.read_paths=["/data/runs"]', "validate", "--deny-warnings", agent(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_validate_with_a_broken_configuration_says_so_and_lints_on(lev: Lev, home: Path, tmp_path: Path) -> None:
    path = write_config(home, "[limits\n")
    proc = lev("validate", "--json", agent(tmp_path))
    assert proc.returncode == 0
    assert [f["code"] for f in json.loads(proc.stdout)["findings"]] == ["read-paths-declared"]
    assert proc.stderr.startswith(f"lev: warning: {path}:1:")
    assert proc.stderr.rstrip().endswith("the checks that depend on your configuration are skipped")

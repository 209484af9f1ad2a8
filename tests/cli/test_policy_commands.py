"""``lev policy list | add | test`` on $LEV_HOME/policy.toml and $LEV_HOME/rules (upstream cli.md)."""

from __future__ import annotations

import json
from pathlib import Path

from support import Lev


def test_add_then_list_then_test(lev: Lev, home: Path) -> None:
    empty = lev("policy", "list")
    assert empty.returncode == 0 and "No static allowlist rules" in empty.stdout
    added = lev("policy", "add", "send_email", "--target", "*.example.com", "--max-sensitivity", "internal")
    assert added.returncode == 0, added.stderr
    assert (home / "policy.toml").exists()
    listed = lev("policy", "list")
    assert "1. send_email [max: internal] -> *.example.com" in listed.stdout
    ok = lev("policy", "test", "send_email", "--target", "ops.example.com", "--taint", "internal")
    assert "ALLOWED by allowlist #1" in ok.stdout
    blocked = lev("policy", "test", "send_email", "--target", "ops.example.com")  # default taint: private
    assert "BLOCKED" in blocked.stdout
    assert "BLOCKED" in lev("policy", "test", "send_email", "--target", "evil.test", "--taint", "internal").stdout


def test_add_defaults_to_internal_and_refuses_a_bad_label(lev: Lev, home: Path) -> None:
    assert lev("policy", "add", "shell").returncode == 0
    assert 'max_sensitivity = "internal"' in (home / "policy.toml").read_text()
    bad = lev("policy", "add", "shell", "--max-sensitivity", "secret")
    assert bad.returncode == 1 and "secret" in bad.stderr and "Traceback" not in bad.stderr


def test_test_reads_scripted_rules_and_names_a_broken_one(lev: Lev, home: Path) -> None:
    rules = home / "rules"
    rules.mkdir(parents=True)
    (rules / "company.rhai").write_text('context.tool == "bash" && context.target == "example.com"')
    (rules / "spin.rhai").write_text("loop {}")
    done = lev("policy", "test", "bash", "--target", "example.com")
    assert "ALLOWED by scripted rule 'company'" in done.stdout
    listed = lev("policy", "list", "--json")
    data = json.loads(listed.stdout)
    assert [r["name"] for r in data["rules"]] == ["company", "spin"]
    other = lev("policy", "test", "bash", "--target", "elsewhere.test")
    assert "BLOCKED" in other.stdout and "spin.rhai" in other.stdout


def test_a_tool_that_sends_nothing_is_not_gated(lev: Lev) -> None:
    done = lev("policy", "test", "read_file", "--json")
    assert json.loads(done.stdout)["outcome"] == "not-outbound"


def test_a_broken_policy_file_is_one_line_naming_file_and_key(lev: Lev, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "policy.toml").write_text('[mcp_overrides.t]\nclearance = "top"\n')
    for args in (("list",), ("test", "shell"), ("add", "shell")):
        done = lev("policy", *args)
        assert done.returncode == 1
        assert "policy.toml: mcp_overrides.t.clearance" in done.stderr and "Traceback" not in done.stderr

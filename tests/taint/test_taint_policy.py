"""Taint tracking's parts on their own: the labels and how a region's label follows its entries,
the policy file (every key checked, a wrong label named with its file and key), the allowlist's
target patterns, the scripted rules (a broken or hostile rule allows nothing and is named), and
the gate's decision for each outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from lev_nb.engine.context.regions import Entry, RegionConfig
from lev_nb.engine.context.window import ContextWindow
from lev_nb.taint import (
    LEVELS, Policy, PolicyError, RuleSet, TaintGate, add_rule, builtin_class, destinations, highest,
    load_policy, load_rules,
)


# -- labels ---------------------------------------------------------------------------------------
def test_labels_are_ordered_public_internal_private() -> None:
    assert LEVELS == ("public", "internal", "private")
    assert highest([]) == "public"
    assert highest(["internal", "public"]) == "internal"
    assert highest(["public", "private", "internal"]) == "private"


@pytest.mark.parametrize("label", LEVELS)
def test_a_regions_label_is_its_most_sensitive_entry_and_recovers_on_eviction(label: str) -> None:
    window = ContextWindow([RegionConfig("tool_results", kind="sliding_window", max_items=2)])
    window.route_tool_result("c1", "read_file", "secret stuff", label=label,
                             routing=_routing("tool_results"))
    assert window.region_labels()["tool_results"] == label
    assert window.label() == label  # the pointer in the conversation quotes it too
    assert window.region("tool_results").entries[0].to_dict().get("label", "public") == label
    for n in range(2):  # two public results push the labelled one out of the window
        window.region("tool_results").add(Entry.make(f"public {n}"))
    assert window.region_labels()["tool_results"] == "public"


def _routing(region: str):
    from lev_nb.engine.context.window import ToolRouting

    return ToolRouting(default_region=region)


def test_a_summary_keeps_the_label_of_what_it_sums_up() -> None:
    window = ContextWindow([RegionConfig("notes", kind="temporary")])
    window.region("notes").add(Entry.make("private fact", label="private"))
    window.replace_with_summary("notes", "a summary")
    assert window.region_labels()["notes"] == "private"


# -- the policy file ------------------------------------------------------------------------------
POLICY = '''
[[allowlist]]
tool = "http_post"
to = ["https://hooks.internal/*"]
max_sensitivity = "internal"

[mcp_overrides."github.create_issue"]
sensitivity = "internal"
direction = "outbound"
clearance = "internal"

[mcp_overrides."my-server".tools]
read_customer_data = { sensitivity = "private" }
'''


def test_the_policy_file_as_the_upstream_documents_it(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    policy = load_policy(path)
    (rule,) = policy.allowlist
    assert (rule.tool, rule.to, rule.max_sensitivity) == ("http_post", ("https://hooks.internal/*",), "internal")
    gate = TaintGate(policy)
    # an MCP tool is server__tool here; the override names it server.tool
    assert gate.classify("github__create_issue").clearance == "internal"
    assert gate.classify("my-server__read_customer_data").sensitivity == "private"
    assert gate.classify("my-server__read_customer_data").direction == "outbound"  # unset: kept


@pytest.mark.parametrize("text, where", [
    ('[[allowlist]]\ntool = "x"\nmax_sensitivity = "secret"\n', "allowlist[0].max_sensitivity"),
    ('[mcp_overrides.t]\nclearance = "top"\n', "mcp_overrides.t.clearance"),
    ('[mcp_overrides.t]\ndirection = "sideways"\n', "mcp_overrides.t.direction"),
    ('[mcp_overrides.s.tools]\nx = { sensitivity = 3 }\n', "mcp_overrides.s.tools.x.sensitivity"),
    ('[[allowlist]]\ntool = "x"\nto = [1]\n', "allowlist[0].to"),
    ('[[allowlist]]\nmax_sensitivity = "public"\n', "allowlist[0].tool"),
    ('[[allowlist]]\ntool = "x"\nmax_sensitivty = "public"\n', "allowlist[0].max_sensitivty"),
    ('allow_all = true\n', "allow_all"),
    ('[[allowlist]\n', "not valid TOML"),
])
def test_a_wrong_key_is_an_error_naming_the_file_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(path) in str(info.value) and where in str(info.value)


def test_no_policy_file_is_an_empty_policy(tmp_path: Path) -> None:
    assert load_policy(tmp_path / "policy.toml").allowlist == ()


def test_add_appends_a_rule_and_keeps_what_the_file_said(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("# my notes\n" + POLICY)
    add_rule("send_email", "internal", "*.example.com", path)
    text = path.read_text()
    assert text.startswith("# my notes\n")
    assert [r.tool for r in load_policy(path).allowlist] == ["http_post", "send_email"]
    with pytest.raises(PolicyError, match="max-sensitivity"):
        add_rule("x", "secret", None, path)
    path.write_text('[[allowlist]]\ntool = "x"\nmax_sensitivity = "nope"\n')
    with pytest.raises(PolicyError):  # a broken file is reported, not appended to
        add_rule("added_tool", "public", None, path)
    assert "added_tool" not in path.read_text()


# -- allowlist rules ------------------------------------------------------------------------------
def _gate(text: str = "", rules: RuleSet | None = None) -> TaintGate:
    from lev_nb.taint.policy import parse_policy
    import tomllib

    return TaintGate(parse_policy(tomllib.loads(text), "policy.toml"), rules)


def test_an_allowlist_rule_without_targets_allows_any_target_up_to_its_ceiling() -> None:
    gate = _gate('[[allowlist]]\ntool = "shell"\nmax_sensitivity = "internal"\n')
    assert gate.check("shell", {"command": "ls"}, "internal").outcome == "allowlist"
    assert gate.check("shell", {"command": "ls"}, "private").outcome == "blocked"
    assert gate.check("web_fetch", {"url": "https://a"}, "internal").outcome == "blocked"


def test_a_target_pattern_must_fit_every_destination_of_the_call() -> None:
    gate = _gate('[[allowlist]]\ntool = "shell"\nto = ["*.example.com"]\nmax_sensitivity = "private"\n')
    ok = gate.check("shell", {"command": "curl -d @x https://api.example.com/v1"}, "private")
    assert ok.outcome == "allowlist" and ok.rule == "allowlist #1"
    both = gate.check("shell", {"command": "curl https://api.example.com; curl https://evil.test/x"}, "private")
    assert both.outcome == "blocked"
    assert gate.check("shell", {"command": "echo hi"}, "private").outcome == "blocked"  # names no target


def test_destinations_are_read_from_the_arguments() -> None:
    assert destinations("web_fetch", {"url": "https://a.example.com/p?q=1"}) == [
        ("https://a.example.com/p?q=1", "a.example.com")]
    assert destinations("send_email", {"to": ["megan@work.com", "bob@x"]}) == [("megan@work.com",), ("bob@x",)]
    assert destinations("shell", {"command": "ls"}) == []


# -- scripted rules -------------------------------------------------------------------------------
def _rules(tmp_path: Path, **files: str) -> RuleSet:
    folder = tmp_path / "rules"
    folder.mkdir(exist_ok=True)
    for name, body in files.items():
        (folder / f"{name}.rhai").write_text(body)
    return load_rules(folder)


def test_a_scripted_rule_sees_tool_target_and_taint_and_names_itself(tmp_path: Path) -> None:
    rules = _rules(tmp_path, company='context.tool == "send_email" && context.target == "ops@corp" '
                                     '&& context.taint_level == "internal"')
    gate = TaintGate(Policy(), rules)
    allowed = gate.check("send_email", {"to": "ops@corp"}, "internal")
    assert (allowed.outcome, allowed.rule) == ("rule", "company")
    assert gate.check("send_email", {"to": "ops@corp"}, "private").outcome == "blocked"
    assert gate.check("send_email", {"to": "eve@x"}, "internal").outcome == "blocked"


def test_the_static_allowlist_is_consulted_before_the_rules(tmp_path: Path) -> None:
    rules = _rules(tmp_path, any="true")
    gate = _gate('[[allowlist]]\ntool = "shell"\nmax_sensitivity = "private"\n', rules)
    assert gate.check("shell", {}, "private").outcome == "allowlist"
    assert gate.check("web_fetch", {}, "private").outcome == "rule"


@pytest.mark.parametrize("body, words", [
    ("loop {}", "Too many operations"),
    ("let s = \"x\"; loop { s += s; }", "rule"),
    ('throw "no"', "no"),
    ("42", "true or false"),
    ("fn f(x) { f(x) } f(1)", "rule"),
])
def test_a_failing_or_hostile_rule_allows_nothing_and_is_named(tmp_path: Path, body: str, words: str) -> None:
    rules = _rules(tmp_path, bad=body)
    verdict = TaintGate(Policy(), rules).check("shell", {}, "private")
    assert verdict.outcome == "blocked"
    (problem,) = verdict.problems
    assert "bad.rhai" in problem and words in problem


def test_a_rule_that_does_not_compile_is_left_out_and_named(tmp_path: Path) -> None:
    rules = _rules(tmp_path, broken="this is @@ not rhai", good="true")
    assert [r.name for r in rules.rules] == ["good"]
    (problem,) = rules.problems
    assert "broken.rhai" in problem


# -- the gate's outcomes --------------------------------------------------------------------------
def test_each_outcome_of_the_gate() -> None:
    gate = TaintGate()
    assert gate.check("read_file", {}, "private").outcome == "not-outbound"
    assert gate.check("write_file", {}, "private").outcome == "not-outbound"
    assert gate.check("shell", {}, "public").outcome == "within-clearance"
    blocked = gate.check("shell", {}, "internal", {"tool_results": "internal", "task": "public"})
    assert blocked.outcome == "blocked" and blocked.regions == ("tool_results",)
    assert "internal data" in blocked.describe() and "public clearance" in blocked.describe()


def test_an_unknown_tool_fails_closed_and_reads_outside_the_workdir_are_private() -> None:
    assert builtin_class("some_mcp__send").outbound
    assert builtin_class("read_file").sensitivity == "internal"
    assert TaintGate(reads_outside=True).classify("read_file").sensitivity == "private"

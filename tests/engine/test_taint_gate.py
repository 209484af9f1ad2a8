"""The taint gate in real runs (scripted model): a call under its clearance runs; one above it is
asked like any approval and runs or not as the person says; with nobody to ask it is refused and
the person is warned; allowlist and scripted rules in $LEV_HOME let it through; a blueprint or the
machine turns tracking on, a stage may opt out, and a bad policy file refuses the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import call, next_request, say

from lev_nb.engine.launch import LaunchError
from lev_nb.messages import ToolResultBlock

GATED = """
[security]
taint_tracking = true

[stages.work]
available_tools = ["read_file", "shell", "current_time"]
{extra}
[stages.work.transitions]
"""
SEND = "echo sent > out.txt"
ALLOW = ["shell", "write_file"]  # a redirect writes a file, so it answers to write_file too


def results_of(model, index: int) -> list[str]:
    return [b.content for m in model.requests[index].messages if m.role == "user"
            for b in m.blocks() if isinstance(b, ToolResultBlock)]


@pytest.fixture
def secret(workdir: Path) -> Path:
    path = workdir / "notes.txt"
    path.write_text("the launch date is March 3")
    return path


def _read_then_send() -> list[dict]:
    return [call("read_file", path="notes.txt"), call("shell", command=SEND), say("done")]


def codes(run) -> list[str]:
    return [w.code for w in run.warnings]


def test_a_call_within_its_clearance_runs(engine, workdir: Path) -> None:
    run, model = engine.run(GATED.format(extra=""), [call("current_time"), call("shell", command=SEND), say("ok")],
                            allow=ALLOW, interactive=False)
    assert run.status == "complete", run.error
    assert (workdir / "out.txt").exists()
    assert not run.pending and "taint-gate-denied" not in codes(run)


def test_internal_data_is_refused_unattended_with_a_warning(engine, workdir: Path, secret: Path) -> None:
    run, model = engine.run(GATED.format(extra=""), _read_then_send(), allow=ALLOW, interactive=False)
    assert run.status == "complete", run.error
    assert not (workdir / "out.txt").exists()
    result = results_of(model, 2)[-1]
    assert result.startswith("[blocked]") and "internal data" in result and "lev policy add shell" in result
    (warning,) = [w for w in run.warnings if w.code == "taint-gate-denied"]
    assert "'shell'" in warning.message and "is in: conversation" in warning.message


def test_asked_and_approved_for_the_run(engine, workdir: Path, secret: Path) -> None:
    turns = [call("read_file", path="notes.txt"), call("shell", command=SEND),
             call("shell", command="echo again > two.txt"), say("done")]
    run, model = engine.start(GATED.format(extra=""), turns, allow=ALLOW, interactive=True)
    request = next_request(run)
    assert request.kind == "approval" and request.tool == "shell" and request.id.startswith("taint-")
    assert "Taint gate" in request.prompt and "internal" in request.prompt
    assert request.describe() == "allow the tool 'shell' past the taint gate?"  # lev respond's listing
    assert run.meta["waiting_on"]["reason"] == "tool_approval"
    run.respond(request.id, True, scope="run")
    run.wait(60)
    assert run.status == "complete", run.error
    assert (workdir / "out.txt").exists() and (workdir / "two.txt").exists()  # the run grant covers the second


def test_asked_and_approved_once_asks_again(engine, workdir: Path, secret: Path) -> None:
    turns = [call("read_file", path="notes.txt"), call("shell", command=SEND),
             call("shell", command="echo again > two.txt"), say("done")]
    run, _ = engine.start(GATED.format(extra=""), turns, allow=ALLOW, interactive=True)
    seen: set[str] = set()
    run.respond(next_request(run, seen).id, True, scope="once")
    run.respond(next_request(run, seen).id, False)
    run.wait(60)
    assert (workdir / "out.txt").exists() and not (workdir / "two.txt").exists()


def test_asked_and_denied(engine, workdir: Path, secret: Path) -> None:
    run, model = engine.start(GATED.format(extra=""), _read_then_send(), allow=ALLOW, interactive=True)
    run.respond(next_request(run).id, False)
    run.wait(60)
    assert run.status == "complete", run.error
    assert not (workdir / "out.txt").exists()
    result = results_of(model, 2)[-1]
    assert result.startswith("[blocked]") and "Denied by the user" in result


def test_the_permission_is_asked_first_then_the_gate(engine, workdir: Path, secret: Path) -> None:
    run, _ = engine.start(GATED.format(extra=""), _read_then_send(), interactive=True)
    seen: set[str] = set()
    first = next_request(run, seen)
    assert first.id.startswith("approve-")  # shell's own ask permission
    run.respond(first.id, True)
    second = next_request(run, seen)
    assert second.id.startswith("taint-")
    run.respond(second.id, True)
    run.wait(60)
    assert (workdir / "out.txt").exists()


def test_private_data_from_an_override_and_an_allowlist_that_stops_at_internal(
        engine, home: Path, workdir: Path, secret: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "policy.toml").write_text(
        '[[allowlist]]\ntool = "shell"\nmax_sensitivity = "internal"\n\n'
        '[mcp_overrides.read_file]\nsensitivity = "private"\n')
    run, model = engine.run(GATED.format(extra=""), _read_then_send(), allow=ALLOW, interactive=False)
    assert not (workdir / "out.txt").exists()
    assert "private data" in results_of(model, 2)[-1]
    (home / "policy.toml").write_text('[[allowlist]]\ntool = "shell"\nmax_sensitivity = "internal"\n')
    (workdir / "out.txt").unlink(missing_ok=True)
    run, _ = engine.run(GATED.format(extra=""), _read_then_send(), allow=ALLOW, interactive=False)
    assert (workdir / "out.txt").exists() and not run.pending


def test_a_scripted_rule_allows_and_a_broken_one_is_reported(engine, home: Path, workdir: Path, secret: Path) -> None:
    rules = home / "rules"
    rules.mkdir(parents=True)
    (rules / "a_spin.rhai").write_text("loop {}")
    (rules / "b_broken.rhai").write_text("fn (")
    (rules / "c_shell.rhai").write_text('context.tool == "shell" && context.taint_level == "internal"')
    run, _ = engine.run(GATED.format(extra=""), _read_then_send(), allow=ALLOW, interactive=False)
    assert run.status == "complete", run.error
    assert (workdir / "out.txt").exists()
    failed = [w.message for w in run.warnings if w.code == "policy-rule-failed"]
    assert any("a_spin.rhai" in m for m in failed) and any("b_broken.rhai" in m for m in failed)


def test_yolo_lets_it_through_with_a_warning(engine, workdir: Path, secret: Path) -> None:
    run, _ = engine.run(GATED.format(extra=""), _read_then_send(), yolo=True)
    assert (workdir / "out.txt").exists()
    assert "taint-gate-waived" in codes(run)


def test_without_tracking_nothing_is_gated(engine, workdir: Path, secret: Path) -> None:
    body = GATED.format(extra="").replace("[security]\ntaint_tracking = true\n", "")
    run, _ = engine.run(body, _read_then_send(), allow=ALLOW, interactive=False)
    assert (workdir / "out.txt").exists()


def test_a_stage_may_opt_out_of_the_agents_tracking(engine, workdir: Path, secret: Path) -> None:
    run, _ = engine.run(GATED.format(extra="[stages.work.security]\ntaint_tracking = false"), _read_then_send(),
                        allow=ALLOW, interactive=False)
    assert (workdir / "out.txt").exists()


def test_the_machine_turns_it_on_and_a_blueprint_cannot_turn_it_off(
        engine, home: Path, workdir: Path, secret: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("taint_tracking = true\n")
    body = GATED.format(extra="").replace("taint_tracking = true", "taint_tracking = false")
    run, _ = engine.run(body, _read_then_send(), allow=ALLOW, interactive=False)
    assert not (workdir / "out.txt").exists() and "taint-gate-denied" in codes(run)


def test_a_bad_label_in_the_policy_file_refuses_the_run(engine, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "policy.toml").write_text('[[allowlist]]\ntool = "shell"\nmax_sensitivity = "secret"\n')
    with pytest.raises(LaunchError) as info:
        engine.start(GATED.format(extra=""), [say("ok")])
    assert "policy.toml" in str(info.value) and "allowlist[0].max_sensitivity" in str(info.value)


def test_the_unattended_refusal_reaches_stderr(lev, tmp_path: Path, workdir: Path, secret: Path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.leviath").write_text('[agent]\nname = "gated"\n' + GATED.format(extra=""))
    script = tmp_path / "turns.json"
    script.write_text(json.dumps(_read_then_send()))
    done = lev("run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(workdir),
               "--allow", "shell", "--allow", "write_file")
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "the taint gate blocked a call: 'shell'" in done.stderr
    assert not (workdir / "out.txt").exists()

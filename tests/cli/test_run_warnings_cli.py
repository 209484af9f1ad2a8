"""What a run did that changes its outcome reaches the person (issue 21, "what reaches the person"):
the three runs that used to end ``complete`` in silence each tell their warning on stderr of
``lev run``, in meta.json ``warnings``, in ``run.warnings`` and as a call-out of the notebook run
view; a run whose answers were all refused says by which check and why; ``lev run`` ends with a
summary line, and ``-v`` tells every event."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import BLUEPRINTS, Lev, call, say

from lev_nb.blueprint import load
from lev_nb.engine.events import event_from_dict
from lev_nb.engine.run_warnings import WARNING_CODES, RunWarning
from lev_nb.notebook import runview

ANSWER_AGENT = """
[agent]
name = "answerer"

[stages.answer]
mode = "output"
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
max_iterations = 8
available_tools = ["submit_output"]
nudge = { enabled = false }
{output}
[stages.answer.transitions]
"""
BROKEN_VALIDATOR = "fn validate(content) {\n  let x = 1 / 0;\n  x\n}\n"  # fails at run time, not compile time
BAD_SCHEMA = json.dumps({"type": "object", "properties": {"n": {"type": "strng"}}})


def answer_agent(tmp_path: Path, validator: str | None = None, schema: str | None = None) -> Path:
    """An agent whose one stage must submit an answer, optionally checked by ``validator`` or by
    ``schema`` (a TOML inline table)."""
    folder = tmp_path / ("answerer-checked" if validator is not None else "answerer-schema" if schema else "answerer")
    (folder / "checks").mkdir(parents=True, exist_ok=True)
    output = ""
    if validator is not None:
        (folder / "checks" / "answer.rhai").write_text(validator, encoding="utf-8")
        output = '[stages.answer.output]\nvalidator = "checks/answer.rhai"\n'
    if schema is not None:
        output = f'[stages.answer.output]\nformat = "json"\nschema = {schema}\n'
    (folder / "agent.leviath").write_text(ANSWER_AGENT.replace("{output}", output), encoding="utf-8")
    return folder


def script(tmp_path: Path, turns: Any) -> str:
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(turns), encoding="utf-8")
    return f"scripted:{path}"


def code_fixer_work(tmp_path: Path) -> Path:
    work = tmp_path / "fixer-work"
    shutil.copytree(BLUEPRINTS / "code-fixer" / "sample", work)
    return work


# The three silent runs of the issue: (name, how to run it with lev, the warning's code, a phrase of it)
def silent_runs(tmp_path: Path) -> dict[str, tuple[list[str], str, str]]:
    submit = [call("submit_output", content='{"n": "x"}'), say("done")]
    return {
        "validator": (
            [str(answer_agent(tmp_path, BROKEN_VALIDATOR)), "--task", "t", "--model", script(tmp_path, submit)],
            "unchecked-answer", "the output validator could not judge this answer, so it was accepted unchecked",
        ),
        "schema": (
            [str(answer_agent(tmp_path)), "--task", "t", "--model", script(tmp_path, submit),
             "--output-format", "json", "--output-schema", BAD_SCHEMA],
            "unchecked-answer", 'at properties.n.type: type = "strng" is not a JSON Schema type',
        ),
        "blueprint-schema": (
            [str(answer_agent(tmp_path, schema='{ type = "object", properties = { n = { type = "strng" } } }')),
             "--task", "t", "--model", script(tmp_path, submit)],
            "unchecked-answer", 'at properties.n.type: type = "strng" is not a JSON Schema type',
        ),
        "denied": (
            [str(BLUEPRINTS / "code-fixer"), "--task", "@" + str(BLUEPRINTS / "code-fixer" / "task.txt"),
             "--model", "scripted:" + str(BLUEPRINTS / "code-fixer" / "scripted.json"),
             "--workdir", str(code_fixer_work(tmp_path)), "--unattended"],
            "tool-denied-unattended", "'edit_file' was denied: it needs a person's approval and nobody could be "
                                      "asked; start the run with --allow edit_file",
        ),
    }


def view_of(run_dir: Path) -> runview.RunState:
    """The notebook run view of a recorded run, folded from its events.jsonl."""
    state = runview.RunState(run_dir.name)
    for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines():
        state.apply(event_from_dict(json.loads(line)))
    return state


@pytest.mark.parametrize("case", ["validator", "schema", "blueprint-schema", "denied"])
def test_a_silent_run_tells_its_warning_everywhere(case: str, tmp_path: Path, home: Path, lev: Lev) -> None:
    args, code, phrase = silent_runs(tmp_path)[case]
    out = lev("run", *args)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    # stderr: the warning, once, as one line, then the summary pointing at lev show
    told = [line for line in out.stderr.splitlines() if line.startswith("lev run: warning")]
    assert len(told) == 1 and phrase in told[0], out.stderr
    last = out.stderr.splitlines()[-1]
    assert last.startswith("lev run: complete · ") and last.endswith(f" · 1 warning — lev show {run_id}")
    # meta.json: the record, with its code, message, stage and time
    meta = json.loads((home / "runs" / run_id / "meta.json").read_text())
    [warning] = meta["warnings"]
    assert set(warning) == {"code", "message", "stage", "at"}
    assert warning["code"] == code and phrase in warning["message"] and warning["stage"]
    assert warning["at"].endswith("Z")
    # the notebook run view, as a saved notebook keeps it: a call-out with inline styles
    html = runview.snapshot_html(view_of(home / "runs" / run_id))
    callout = html[html.index("<div class='lev-warnings'"):]
    assert callout.startswith("<div class='lev-warnings' role='note' style='") and "border-left:4px solid" in callout
    assert f"data-code='{code}'" in callout and "1 warning" in callout
    assert html.index("<div class='lev-warnings'") < html.index("<div class='lev-visit")  # above the stages' lines
    assert "⚠ 1 warning:" in runview.snapshot_text(view_of(home / "runs" / run_id))


@pytest.mark.parametrize("case", ["validator", "schema", "denied"])
def test_run_warnings_in_python(case: str, tmp_path: Path, engine: Any) -> None:
    from lev_nb.notebook.widget import snapshot_bundle
    from lev_nb.providers import ScriptedModel

    submit = [call("submit_output", content='{"n": "x"}'), say("done")]
    if case == "validator":
        run, _ = engine.run(load(answer_agent(tmp_path, BROKEN_VALIDATOR)), submit)
    elif case == "schema":
        run, _ = engine.run(load(answer_agent(tmp_path)), submit, output_format="json",
                            output_schema=json.loads(BAD_SCHEMA))
    else:
        turns = json.loads((BLUEPRINTS / "code-fixer" / "scripted.json").read_text())
        run, _ = engine.run(load(BLUEPRINTS / "code-fixer"), ScriptedModel(turns),
                            workdir=code_fixer_work(tmp_path), interactive=False)
    assert run.status == "complete", run.error
    [warning] = run.warnings
    assert isinstance(warning, RunWarning) and warning.code in WARNING_CODES
    assert warning.code == ("tool-denied-unattended" if case == "denied" else "unchecked-answer")
    assert [w.to_dict() for w in run.warnings] == run.meta["warnings"]
    html = snapshot_bundle(run)["text/html"]
    assert "<div class='lev-warnings' role='note' style='" in html and f"data-code='{warning.code}'" in html


def test_a_denied_tool_is_told_once_however_often_it_is_called(tmp_path: Path, engine: Any) -> None:
    toml = """
    [stages.work]
    mode = "autonomous"
    available_tools = ["write_file"]
    max_iterations = 5
    [stages.work.transitions]
    """
    turns = [call("write_file", path="a.txt", content="1"), call("write_file", path="b.txt", content="2"), say("gave up")]
    run, _ = engine.run(toml, turns, interactive=False)
    assert [(w.code, w.stage) for w in run.warnings] == [("tool-denied-unattended", "work")]
    assert "--allow write_file" in run.warnings[0].message


def test_a_run_whose_answers_are_all_refused_says_by_what_and_why(tmp_path: Path, lev: Lev) -> None:
    folder = answer_agent(tmp_path, 'fn validate(content) { "cite a source for every claim" }')
    turns = [call("submit_output", content=f"answer {i}") for i in range(4)] + [say("I give up")] * 4
    out = lev("run", str(folder), "--task", "t", "--model", script(tmp_path, turns))
    # The run completes with output_forced, as the upstream's outputs page says, and says why.
    assert out.returncode == 0
    told = [line for line in out.stderr.splitlines() if line.startswith("lev run: warning (answer): ")]
    assert len(told) == 1 and told[0].endswith(
        "submit_output was called and refused 4 times; the last answer was rejected by validator "
        "'checks/answer.rhai': cite a source for every claim")


def test_a_schema_refusal_names_the_schema(tmp_path: Path, engine: Any) -> None:
    schema = {"type": "object", "required": ["n"]}
    turns = [call("submit_output", content='{"m": 1}')] + [say("no")] * 4
    run, _ = engine.run(load(answer_agent(tmp_path)), turns, output_format="json", output_schema=schema)
    assert run.status == "complete" and run.flags["output_forced"] >= 1
    (warning,) = run.warnings
    assert "refused once; the last answer was rejected by the output schema: $: 'n' is a required property" in warning.message


def test_verbose_tells_every_event_as_a_sentence(tmp_path: Path, lev: Lev) -> None:
    args, _, phrase = silent_runs(tmp_path)["validator"]
    out = lev("run", *args, "-v")
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    told = [line.split("  ", 1)[1].strip() for line in lines if line[:2].isdigit()]  # "HH:MM:SS.mmm  stage  text"
    assert "-             Run started: t" in [t for t in told] or any(t.endswith("Run started: t") for t in told)
    assert any(t.startswith("answer") and t.endswith("Entered answer.") for t in told)
    assert any(t.startswith("answer") and "Called submit_output(content='{\"n\": \"x\"}')" in t for t in told)
    assert any(line.startswith("lev run: warning (answer): ") and phrase in line for line in lines)
    assert "stage answer" not in lines  # -v replaces the progress line
    assert lines[-1].startswith("lev run: complete · 1 stage (answer) · ")


def test_json_output_stays_json_and_warnings_go_to_stderr(tmp_path: Path, lev: Lev) -> None:
    args, _, phrase = silent_runs(tmp_path)["schema"]
    out = lev("run", *args, "--json")
    meta = json.loads(out.stdout)  # stdout parses on its own
    assert [w["code"] for w in meta["warnings"]] == ["unchecked-answer"]
    assert phrase in out.stderr


def test_quiet_still_tells_warnings(tmp_path: Path, lev: Lev) -> None:
    args, _, phrase = silent_runs(tmp_path)["validator"]
    out = lev("run", *args, "--quiet")
    [line] = out.stderr.splitlines()
    assert line.startswith("lev run: warning (answer): ") and phrase in line


def test_ps_counts_the_warnings(tmp_path: Path, lev: Lev) -> None:
    args, _, _ = silent_runs(tmp_path)["validator"]
    run_id = lev("run", *args, "--quiet").stdout.strip()
    out = lev("ps")
    header, row = out.stdout.splitlines()[:2]
    assert header.split()[-2:] == ["WARN", "UPDATED"]
    assert row.startswith(run_id) and row.split()[-2] == "1"
    assert json.loads(lev("ps", "--json").stdout)["finished"][0]["warnings"] == 1


def test_a_run_cut_short_after_refusals_still_says_them(tmp_path: Path, engine: Any) -> None:
    folder = answer_agent(tmp_path, 'fn validate(content) { "too short" }')
    # the model fails after two refused answers: the error says both
    run, _ = engine.run(load(folder), [call("submit_output", content="a"), call("submit_output", content="b")])
    assert run.status == "error"
    assert "script exhausted" in run.error and run.error.endswith("(submit_output was called and refused 2 times; the last answer was rejected by "
                              "validator 'checks/answer.rhai': too short)")


@pytest.mark.parametrize("workers", [None, 1])
def test_copies_of_a_run_tell_their_warnings_by_run_id(workers: int | None, tmp_path: Path, lev: Lev) -> None:
    args, _code, phrase = silent_runs(tmp_path)["validator"]
    out = lev("run", *args, "--count", "2", *(["--workers", str(workers)] if workers else []))
    assert out.returncode == 0, out.stderr
    run_ids = out.stdout.split()
    assert len(run_ids) == 2
    for run_id in run_ids:  # each copy's warning, once, named by the copy's run id
        told = [line for line in out.stderr.splitlines() if line.startswith(f"lev run {run_id}: warning")]
        assert len(told) == 1 and phrase in told[0], out.stderr

"""Final outputs end to end: whole runs with a scripted model (issue #5, spec/runtime.md §5.1.3, §8).

Covers the submit_output tool in output stages and require_output stages, the owed-output nudge
and its bound, the run that ends owing an answer (terminal edge and DONE), refusals keeping the
previous answer, validators (from a file, from a string, broken, looping, not compiling), the
256 KiB cap, the pinned final_output mirror, the output flags and ``run.result``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from support import OUTPUT_STAGE, RUN_TIMEOUT_S, call, events_of, request_text, say

from lev_nb.engine.pipeline.outputs import MAX_FINAL_OUTPUT_BYTES
from lev_nb.engine.pipeline.holds import OWED_OUTPUT_NUDGE
from lev_nb.engine.pipeline.transitions import OWED_AT_END


def tool_results(request) -> str:
    """Every tool result the request carries, joined."""
    from lev_nb.messages import ToolResultBlock

    parts = []
    for message in request.messages:
        for block in message.blocks():
            if isinstance(block, ToolResultBlock):
                parts.append(block.content)
    return "\n".join(parts)


# ------------------------------------------------------------------------- the tool itself
def test_an_output_stage_records_the_answer_and_ends_the_run(engine):
    run, model = engine.run(OUTPUT_STAGE, [call("submit_output", content="The answer is 42."), say("sent")])
    assert run.status == "complete", run.error
    assert [t.name for t in model.requests[0].tools] == ["submit_output"]
    assert "Recorded as this run's final output." in tool_results(model.requests[1])
    result = run.result
    assert result.content == "The answer is 42."
    assert result.format is None
    assert result.stage == "answer"
    assert result.truncated is False
    assert result.artifacts == []
    assert datetime.fromisoformat(result.submitted_at).year >= 2024
    kinds = [e.kind for e in run.events.snapshot()]
    assert kinds.index("output_submitted") < kinds.index("completed")
    completed = events_of(run, "completed")[0]
    assert completed.produced_output is True


def test_the_answer_is_written_beside_the_run_record(engine):
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="ünïcode ✓\n"), say("sent")])
    folder = Path(run.run_dir)
    assert (folder / "final_output").read_bytes() == "ünïcode ✓\n".encode()
    descriptor = run.meta["final_output"]
    assert descriptor == {
        "stage": "answer",
        "submitted_at": run.result.submitted_at,
        "bytes": len("ünïcode ✓\n".encode()),
        "truncated": False,
    }
    import json

    on_disk = json.loads((folder / "meta.json").read_text())
    assert on_disk["final_output"] == descriptor
    assert on_disk["flags"]["produced_output"] is True


def test_artifacts_travel_with_the_answer(engine, workdir):
    (workdir / "data").mkdir()
    (workdir / "data" / "rows.csv").write_text("a,b\n1,2\n")
    turns = [call("submit_output", content="2 rows", artifacts=["data/rows.csv"]), say("sent")]
    run, _ = engine.run(OUTPUT_STAGE, turns)
    assert run.result.artifacts == ["data/rows.csv"]
    assert run.meta["final_output"]["artifacts"] == ["data/rows.csv"]


def test_a_later_submission_replaces_the_earlier_one(engine):
    turns = [call("submit_output", content="draft"), call("submit_output", content="final"), say("sent")]
    run, _ = engine.run(OUTPUT_STAGE, turns)
    assert run.result.content == "final"
    assert len(events_of(run, "output_submitted")) == 2
    assert (Path(run.run_dir) / "final_output").read_text() == "final"


def test_a_refusal_keeps_the_previous_answer_and_reaches_the_agent(engine, workdir):
    turns = [
        call("submit_output", content="good answer", artifacts=["report.md"]),
        call("submit_output", content="bad answer", artifacts=["../outside.md"]),
        say("sent"),
    ]
    run, model = engine.run(OUTPUT_STAGE, turns)
    assert run.status == "complete", run.error
    assert run.result.content == "good answer"
    assert run.result.artifacts == ["report.md"]
    assert (Path(run.run_dir) / "final_output").read_text() == "good answer"
    rejected = events_of(run, "output_rejected")
    assert [e.reason for e in rejected] == [
        "[error] these artifact paths do not resolve inside the working directory: ../outside.md"
    ]
    assert "do not resolve inside the working directory: ../outside.md" in tool_results(model.requests[2])
    finished = [e for e in events_of(run, "tool_finished") if e.tool == "submit_output"]
    assert [e.ok for e in finished] == [True, False]


def test_a_refused_first_submission_leaves_no_answer_yet(engine):
    turns = [call("submit_output", content="the result"), say("sent")]
    run, model = engine.run(OUTPUT_STAGE, [call("submit_output", content="   "), *turns])
    assert run.result.content == "the result"
    assert "final output is empty" in tool_results(model.requests[1])


def test_a_bare_stage_name_is_refused_in_a_run(engine):
    toml = """
    [stages.triage]
    available_tools = ["submit_output"]
    require_output = true
    nudge = { enabled = false }
    [stages.triage.transitions.escalate]
    hint = "needs a human"
    [stages.escalate]
    nudge = { enabled = false }
    [stages.escalate.transitions]
    """
    turns = [call("submit_output", content="Escalate"), call("submit_output", content="route: escalate"),
             say("done"), say("done")]
    run, _ = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert "'escalate' is the name of a stage in this agent" in events_of(run, "output_rejected")[0].reason
    assert run.result.content == "route: escalate"


# ------------------------------------------------------------------------- owing an answer
def test_the_owed_output_nudge_runs_three_times_then_the_run_completes_forced(engine):
    run, model = engine.run(OUTPUT_STAGE, [say("one"), say("two"), say("three"), say("four")])
    nudges = events_of(run, "nudge")
    assert [n.reason for n in nudges] == ["required_output"] * 3
    assert all(n.text == OWED_OUTPUT_NUDGE for n in nudges)
    assert OWED_OUTPUT_NUDGE in request_text(model.requests[1])
    assert len(model.requests) == 4
    assert run.flags["output_forced"] == 1
    assert run.flags["produced_output"] is False
    # A missing output never strands a run: it completes, output_forced set, and the person is told.
    assert run.status == "complete" and run.error is None
    assert run.result is None
    assert [(w.code, w.stage) for w in run.warnings] == [("output-forced", "answer")]  # told once
    assert "left without the final output it owes, after 3 reminders" in run.warnings[0].message


def test_require_output_on_an_ordinary_stage_nudges_then_is_satisfied(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir", "submit_output"]
    require_output = true
    nudge = { enabled = false }
    [stages.work.transitions.wrap]
    hint = "done"
    [stages.wrap]
    nudge = { enabled = false }
    [stages.wrap.transitions]
    """
    turns = [call("list_dir"), say("finished"), call("submit_output", content="3 files"), say("now done"), say("bye")]
    run, model = engine.run(toml, turns)
    assert run.status == "complete", run.error
    assert [n.reason for n in events_of(run, "nudge")] == ["required_output"]
    assert run.flags["output_forced"] == 0
    assert run.result.stage == "work"
    assert run.stage_history == ["work", "wrap"]
    assert "Before this stage ends you must call `submit_output`" in "\n".join(model.requests[0].system)
    # The pinned mirror follows the run into the next stage.
    assert model.requests[-1].stage == "wrap"
    assert "## final_output\n3 files" in "\n".join(model.requests[-1].system)


def test_a_forced_stage_carries_on_and_the_run_completes(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir", "submit_output"]
    require_output = true
    nudge = { enabled = false }
    [stages.work.transitions.wrap]
    hint = "done"
    [stages.wrap]
    nudge = { enabled = false }
    [stages.wrap.transitions]
    """
    turns = [call("list_dir"), say("a"), say("b"), say("c"), say("d"), say("wrap done")]
    run, _model = engine.run(toml, turns)
    assert run.stage_history == ["work", "wrap"]  # a missing output never strands the run
    assert len(events_of(run, "nudge")) == 3
    assert run.flags["output_forced"] == 1
    warnings = [e.message for e in events_of(run, "warning")]
    assert "stage 'work' left without the final output it owes, after 3 reminders to call submit_output" in warnings
    assert [(w.code, w.stage) for w in run.warnings] == [("output-forced", "work")]
    assert run.status == "complete"  # as the upstream's outputs page says: forced, not an error
    assert run.flags["output_forced"] >= 1


def test_max_iterations_takes_precedence_and_both_flags_are_recorded(engine):
    toml = OUTPUT_STAGE.replace('mode = "output"', 'mode = "output"\nmax_iterations = 2')
    run, model = engine.run(toml, [say("a"), say("b"), say("c")])
    assert len(model.requests) == 2
    assert run.flags["max_iterations_hit"] == 1
    assert run.flags["output_forced"] == 1
    assert run.status == "complete"


HUB = """
[stages.hub]
available_tools = ["list_dir", "submit_output"]
allow_complete = true
nudge = { enabled = false }
[stages.hub.transitions.answer]
hint = "write the answer"
[stages.hub.transitions.more]
hint = "keep looking"
[stages.more]
[stages.more.transitions]
[stages.answer]
mode = "output"
available_tools = ["submit_output"]
[stages.answer.transitions]
"""


def test_choosing_done_while_an_answer_is_owed_completes_forced(engine):
    run, model = engine.run(HUB, [call("list_dir"), say("finished"), say("DONE")])
    assert model.requests[-1].purpose == "routing"
    assert run.stage_history == ["hub"]
    assert run.status == "complete" and run.flags["output_forced"] == 1
    assert run.result is None


def test_choosing_done_after_an_answer_was_submitted_completes(engine):
    turns = [call("submit_output", content="found it early"), say("finished"), say("DONE")]
    run, model = engine.run(HUB, turns)
    assert model.requests[-1].purpose == "routing"
    assert run.status == "complete", run.error
    assert run.result.content == "found it early"
    assert run.result.stage == "hub"


def test_a_run_that_owes_nothing_completes_without_an_answer(engine):
    toml = """
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions]
    """
    run, _ = engine.run(toml, [call("list_dir"), say("done")])
    assert run.status == "complete", run.error
    assert run.result is None
    assert run.flags["output_forced"] == 0
    assert "final_output" not in run.meta or not run.meta["final_output"]


# ------------------------------------------------------------------------- validators
FOLDER_AGENT = """
[agent]
name = "validated"

[stages.answer]
mode = "output"
available_tools = ["submit_output"]
nudge = { enabled = false }
[stages.answer.output]
format = "markdown"
validator = "checks/answer.rhai"
[stages.answer.transitions]
"""


def agent_folder(tmp_path: Path, script: str, toml: str = FOLDER_AGENT) -> Path:
    folder = tmp_path / "agent"
    (folder / "checks").mkdir(parents=True)
    (folder / "agent.leviath").write_text(toml)
    (folder / "checks" / "answer.rhai").write_text(script)
    return folder


def test_a_validator_file_rejects_then_accepts(engine, tmp_path):
    from lev_nb.blueprint import load

    script = 'fn validate(content) {\n  if !content.starts_with("# ") { return "start with a heading"; }\n}\n'
    bp = load(str(agent_folder(tmp_path, script)))
    turns = [call("submit_output", content="no heading"), call("submit_output", content="# Findings"), say("ok")]
    run, model = engine.run(bp, turns)
    assert run.status == "complete", run.error
    assert run.result.content == "# Findings"
    assert run.result.format == "markdown"
    assert "[error] the final output was rejected: start with a heading" in tool_results(model.requests[1])
    assert events_of(run, "output_submitted")[0].checked is True


def test_a_validator_that_does_not_compile_fails_before_any_model_call(engine, tmp_path):
    from lev_nb.blueprint import load
    from lev_nb.providers import ScriptedModel
    from lev_nb.scripting import ScriptError

    bp = load(str(agent_folder(tmp_path, "fn validate(content) {\n  let x = ;\n}\n")))
    model = ScriptedModel([call("submit_output", content="x"), say("ok")])
    with pytest.raises(ScriptError) as info:
        engine.start(bp, model)
    assert "checks/answer.rhai" in str(info.value)
    assert model.requests == []
    runs = engine.home / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # no run was even recorded


def test_a_validator_outside_the_agent_folder_is_refused_at_start(engine, tmp_path):
    from lev_nb.blueprint import load
    from lev_nb.providers import ScriptedModel
    from lev_nb.scripting import ScriptError

    folder = agent_folder(tmp_path, "fn validate(content) { () }\n",
                          FOLDER_AGENT.replace("checks/answer.rhai", "../outside.rhai"))
    (tmp_path / "outside.rhai").write_text("fn validate(content) { () }\n")
    model = ScriptedModel([say("x")])
    with pytest.raises(ScriptError, match="outside the agent folder"):
        engine.start(load(str(folder)), model)
    assert model.requests == []


def test_a_validator_without_validate_fails_at_start(engine):
    from lev_nb.providers import ScriptedModel
    from lev_nb.scripting import ScriptError

    model = ScriptedModel([say("x")])
    with pytest.raises(ScriptError, match="validate"):
        engine.start(OUTPUT_STAGE, model, output_validator="fn check(c) { () }")
    assert model.requests == []


def test_a_notebook_string_validator_judges_answers(engine):
    validator = 'fn validate(c) { if c.len() > 10 { return "keep it under 10 characters"; } "" }'
    turns = [call("submit_output", content="far too long an answer"), call("submit_output", content="short"), say("ok")]
    run, _model = engine.run(OUTPUT_STAGE, turns, output_validator=validator)
    assert run.status == "complete", run.error
    assert run.result.content == "short"
    assert events_of(run, "output_rejected")[0].reason == (
        "[error] the final output was rejected: keep it under 10 characters"
    )
    assert run.meta["output_request"] == {"validator": "<launch request>"}


def test_a_broken_string_validator_fails_before_any_model_call(engine):
    from lev_nb.providers import ScriptedModel
    from lev_nb.scripting import ScriptError

    model = ScriptedModel([say("x")])
    with pytest.raises(ScriptError):
        engine.start(OUTPUT_STAGE, model, output_validator="fn validate(c) { if }")
    assert model.requests == []


def test_a_validator_that_loops_forever_records_the_answer_unchecked(engine):
    turns = [call("submit_output", content="the result"), say("ok")]
    run, model = engine.run(OUTPUT_STAGE, turns, output_validator="fn validate(c) { loop { } }")
    assert run.status == "complete", run.error
    assert run.result.content == "the result"
    assert run.result.checked is False
    submitted = events_of(run, "output_submitted")
    assert [e.checked for e in submitted] == [False]
    warnings = [e.message for e in events_of(run, "warning")]
    assert any("accepted unchecked" in w for w in warnings)
    assert "Recorded as this run's final output." in tool_results(model.requests[1])


def test_a_validator_that_throws_never_blocks_an_answer(engine):
    turns = [call("submit_output", content="the result"), say("ok")]
    run, _ = engine.run(OUTPUT_STAGE, turns, output_validator='fn validate(c) { throw "oops" }')
    assert run.status == "complete", run.error
    assert run.result.content == "the result"
    assert any("oops" in e.message for e in events_of(run, "warning"))


def test_a_launch_format_drops_a_declared_validator(engine, tmp_path):
    from lev_nb.blueprint import load

    folder = agent_folder(tmp_path, 'fn validate(content) { "always no" }\n')
    turns = [call("submit_output", content='{"a": 1}'), say("ok")]
    run, _ = engine.run(load(str(folder)), turns, output_format="json")
    assert run.status == "complete", run.error
    assert run.result.content == '{"a": 1}'
    assert events_of(run, "output_rejected") == []


# ------------------------------------------------------------------------- the size cap
def test_an_answer_over_256_kib_is_cut_recorded_truncated_and_the_agent_is_told(engine):
    long = "ü" * (MAX_FINAL_OUTPUT_BYTES // 2) + "tail beyond the cap"
    run, model = engine.run(OUTPUT_STAGE, [call("submit_output", content=long), say("sent")])
    assert run.status == "complete", run.error
    result = run.result
    assert result.truncated is True
    assert len(result.content.encode("utf-8")) == MAX_FINAL_OUTPUT_BYTES
    assert long.startswith(result.content)
    assert "tail" not in result.content
    assert run.meta["final_output"]["truncated"] is True
    assert run.meta["final_output"]["bytes"] == MAX_FINAL_OUTPUT_BYTES
    assert (Path(run.run_dir) / "final_output").read_bytes() == result.content.encode("utf-8")
    told = tool_results(model.requests[1])
    assert "256 KiB" in told and "cut short" in told
    assert events_of(run, "output_submitted")[0].truncated is True


def test_an_odd_byte_cap_lands_on_a_character_boundary(engine):
    long = "a" + "€" * (MAX_FINAL_OUTPUT_BYTES // 3 + 5)
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content=long), say("sent")])
    raw = (Path(run.run_dir) / "final_output").read_bytes()
    assert raw.decode("utf-8") == run.result.content  # no broken character at the end
    assert MAX_FINAL_OUTPUT_BYTES - 3 < len(raw) <= MAX_FINAL_OUTPUT_BYTES


# ------------------------------------------------------------------------- the context mirror
def test_the_answer_is_mirrored_into_the_pinned_final_output_region(engine):
    turns = [call("submit_output", content="first version"), call("submit_output", content="second version"),
             say("sent")]
    _run, model = engine.run(OUTPUT_STAGE, turns)
    assert "## final_output" not in "\n".join(model.requests[0].system)
    after_first = "\n".join(model.requests[1].system)
    assert "## final_output\nfirst version" in after_first
    after_second = "\n".join(model.requests[2].system)
    assert "second version" in after_second
    assert "first version" not in after_second  # replaced, not appended


def test_a_long_answer_is_trimmed_in_the_mirror_with_a_note(engine):
    long = " ".join(f"word{i}" for i in range(20000))
    run, model = engine.run(OUTPUT_STAGE, [call("submit_output", content=long), say("sent")])
    assert run.result.content == long  # the record keeps it whole
    mirror = next(block for block in model.requests[1].system if block.startswith("## final_output"))
    assert len(mirror) < len(long) // 4
    assert "the complete answer is the run's final output" in mirror


def test_context_tools_cannot_write_the_final_output_region(engine):
    toml = """
    [stages.answer]
    mode = "output"
    available_tools = ["submit_output", "context_write"]
    nudge = { enabled = false }
    [stages.answer.transitions]
    """
    turns = [call("context_write", region="final_output", content="sneaky"),
             call("submit_output", content="real"), say("sent")]
    run, model = engine.run(toml, turns)
    assert "kept by the runtime" in tool_results(model.requests[1])
    assert run.result.content == "real"


# ------------------------------------------------------------------------- flags
WRITER = """
[tool_permissions]
write_file = "allow"
[stages.work]
available_tools = ["write_file", "submit_output"]
nudge = { enabled = false }
[stages.work.transitions]
"""


def test_an_answer_alone_counts_as_output(engine):
    run, _ = engine.run(WRITER, [call("submit_output", content="nothing to change"), say("done")])
    flags = run.flags
    assert flags["modified_file_count"] == 0
    assert flags["no_output_tools"] is False
    assert flags["produced_output"] is True
    assert flags["empty_output"] is False


def test_no_files_and_no_answer_is_an_empty_output(engine):
    run, _ = engine.run(WRITER, [say("nothing")])
    assert run.status == "complete", run.error
    flags = run.flags
    assert (flags["produced_output"], flags["no_output_tools"], flags["empty_output"]) == (False, False, True)


@pytest.mark.usefixtures("blueprint_permissions")
def test_a_written_file_counts_as_output(engine, workdir):
    run, _ = engine.run(WRITER, [call("write_file", path="out.txt", content="x"), say("done")])
    assert (workdir / "out.txt").read_text() == "x"
    assert run.flags["modified_file_count"] == 1
    assert run.flags["empty_output"] is False
    assert run.flags["produced_output"] is False


def test_a_run_without_modifying_tools_is_never_empty(engine):
    toml = """
    [stages.look]
    available_tools = ["list_dir"]
    [stages.look.transitions]
    """
    run, _ = engine.run(toml, [call("list_dir"), say("seen")])
    flags = run.flags
    assert (flags["no_output_tools"], flags["produced_output"], flags["empty_output"]) == (True, False, False)


def test_a_run_ending_without_anything_is_empty(engine):
    toml = """
    [tool_permissions]
    write_file = "allow"
    [stages.answer]
    mode = "output"
    available_tools = ["submit_output", "write_file"]
    nudge = { enabled = false }
    [stages.answer.transitions]
    """
    run, _ = engine.run(toml, [say("a"), say("b"), say("c"), say("d")])
    assert run.status == "complete" and run.flags["output_forced"] == 1
    assert run.flags["empty_output"] is True


# ------------------------------------------------------------------------- on_complete
def test_on_complete_receives_the_run_with_its_result(engine):
    import threading

    seen = []
    done = threading.Event()

    def finished(run):
        seen.append((run.status, run.result.content if run.result else None, run.flags["produced_output"]))
        done.set()

    _run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("ok")], on_complete=finished)
    assert done.wait(RUN_TIMEOUT_S)
    assert seen == [("complete", "42", True)]


def test_on_complete_is_called_for_a_run_that_ends_owing_an_answer(engine):
    import threading

    seen = []
    done = threading.Event()
    _run, _ = engine.run(
        OUTPUT_STAGE,
        [say("a"), say("b"), say("c"), say("d")],
        on_complete=lambda r: (seen.append((r.status, r.result, r.error)), done.set()),
    )
    assert done.wait(RUN_TIMEOUT_S)
    assert seen == [("complete", None, None)]


def test_a_failing_on_complete_is_a_warning_not_a_crash(engine):
    def explode(run):
        raise RuntimeError("callback broke")

    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("ok")], on_complete=explode)
    assert run.status == "complete"
    assert any("callback broke" in e.message for e in events_of(run, "warning"))


def test_blueprint_text_loaded_by_the_public_loader_runs(tmp_path):
    """The brief's own recipe: load(TOML text), start_run with a ScriptedModel, wait, read."""
    from lev_nb.blueprint import load
    from lev_nb.engine.api import start_run
    from lev_nb.engine.pipeline.inference import RetryPolicy
    from lev_nb.providers import ScriptedModel

    (tmp_path / "w").mkdir()
    bp = load('[agent]\nname = "demo"\n' + OUTPUT_STAGE)
    model = ScriptedModel([call("submit_output", content="- a\n- b\n"), say("ok")])
    run = start_run(bp, task="t", model=model, workdir=tmp_path / "w", home=tmp_path / "home",
                    retry=RetryPolicy(max_attempts=1), output_format="yaml")
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert run.result.format == "yaml"
    assert str(run.result) == "- a\n- b\n"


def test_a_hostile_submission_is_refused_and_the_run_goes_on(engine):
    turns = [call("submit_output", content="[" * 50_000), call("submit_output", content="NaN"),
             call("submit_output", content="[1]"), say("sent")]
    run, _model = engine.run(OUTPUT_STAGE, turns, output_format="json")
    assert run.status == "complete", run.error
    assert run.result.content == "[1]"
    reasons = [e.reason for e in events_of(run, "output_rejected")]
    assert reasons[0] == "[error] the final output is not valid json: it is nested too deeply to parse"
    assert reasons[1] == "[error] the final output is not valid json: NaN is not a JSON value"


def test_the_owed_output_bound_is_three_whatever_max_revisits_says(engine):
    # spec/runtime.md §16.2: the code's fixed cap of 3, not max_revisits, bounds these re-runs.
    toml = OUTPUT_STAGE.replace('mode = "output"', 'mode = "output"\nmax_revisits = 1')
    run, model = engine.run(toml, [say("a"), say("b"), say("c"), say("d")])
    assert len(events_of(run, "nudge")) == 3
    assert len(model.requests) == 4
    assert run.flags["output_forced"] == 1


def test_a_validator_path_in_a_text_blueprint_fails_at_start(engine):
    from lev_nb.providers import ScriptedModel
    from lev_nb.scripting import ScriptError

    toml = OUTPUT_STAGE.replace("[stages.answer.transitions]",
                                '[stages.answer.output]\nvalidator = "check.rhai"\n[stages.answer.transitions]')
    model = ScriptedModel([say("x")])
    with pytest.raises(ScriptError, match="check.rhai"):
        engine.start(toml, model)
    assert model.requests == []

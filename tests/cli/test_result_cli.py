"""``lev run`` output flags, ``lev result`` (default / --raw / --json) and ``lev ps`` verdicts, run
in this process (the ``lev`` fixture) with a scripted model and a private LEV_HOME."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import Lev, call, say

from lev_nb.engine.pipeline.outputs import MAX_FINAL_OUTPUT_BYTES

OUTPUT_AGENT = """
[agent]
name = "answerer"

[tool_permissions]
write_file = "allow"

[agent.output]
format = "json"

[agent.output.schema]
type = "object"
required = ["n"]

[stages.answer]
mode = "output"
available_tools = ["submit_output", "write_file"]
nudge = { enabled = false }
[stages.answer.transitions]
"""

WRITER_AGENT = """
[agent]
name = "writer"

[tool_permissions]
write_file = "allow"

[stages.work]
available_tools = ["write_file"]
nudge = { enabled = false }
[stages.work.transitions]
"""


class Cli:
    """Runs ``lev`` in a private home, with agents and scripts written under tmp_path."""

    def __init__(self, tmp_path: Path, home: Path, lev: Lev) -> None:
        self.tmp = tmp_path
        self.home = home
        self._lev = lev
        self._count = 0

    def agent(self, toml: str) -> Path:
        self._count += 1
        folder = self.tmp / f"agent{self._count}"
        folder.mkdir()
        (folder / "agent.leviath").write_text(toml)
        return folder

    def script(self, turns: list[dict[str, Any]]) -> Path:
        self._count += 1
        path = self.tmp / f"script{self._count}.json"
        path.write_text(json.dumps(turns))
        return path

    def lev(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        """``lev ARGS``; stdout and stderr as bytes, as a subprocess would give them."""
        done = self._lev(*args)
        return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.encode(), done.stderr.encode())

    def run(self, toml: str, turns: list[dict[str, Any]], *flags: str) -> tuple[subprocess.CompletedProcess[bytes], str]:
        """``lev run`` to the end; returns the process and the printed run id."""
        work = self.tmp / f"work{self._count}"
        work.mkdir()
        proc = self.lev("run", str(self.agent(toml)), "--task", "answer it", "--model",
                        f"scripted:{self.script(turns)}", "--workdir", str(work), "--quiet", *flags)
        return proc, proc.stdout.decode().strip()

    def meta(self, run_id: str) -> dict[str, Any]:
        return json.loads((self.home / "runs" / run_id / "meta.json").read_text())


@pytest.fixture
def cli(tmp_path: Path, home: Path, lev: Lev, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.chdir(tmp_path)  # a relative @FILE is read from here
    monkeypatch.delenv("LEV_NB_MODEL", raising=False)
    return Cli(tmp_path, home, lev)


def err(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode()


# ------------------------------------------------------------------------- lev result
def test_result_default_names_the_run_stage_and_format(cli):
    proc, run_id = cli.run(OUTPUT_AGENT, [call("submit_output", content='{"n": 1}'), say("done")])
    assert proc.returncode == 0, err(proc)
    shown = cli.lev("result", run_id)
    assert shown.returncode == 0, err(shown)
    assert shown.stdout.decode() == f"Final output (json) from run '{run_id}', stage 'answer':\n\n{{\"n\": 1}}\n"


def test_result_raw_is_the_exact_bytes_for_a_pipeline(cli):
    content = '{\n  "n": 1,\n  "city": "Zürich ✓"\n}\n'
    proc, run_id = cli.run(OUTPUT_AGENT, [call("submit_output", content=content), say("done")])
    assert proc.returncode == 0, err(proc)
    raw = cli.lev("result", run_id, "--raw")
    assert raw.returncode == 0
    assert raw.stdout == content.encode("utf-8")
    assert raw.stdout == (cli.home / "runs" / run_id / "final_output").read_bytes()


def test_result_raw_adds_only_a_final_newline_when_missing(cli):
    _proc, run_id = cli.run(OUTPUT_AGENT, [call("submit_output", content='{"n": 2}'), say("done")])
    assert cli.lev("result", run_id, "--raw").stdout == b'{"n": 2}\n'


def test_result_json_is_the_answer_with_its_shape(cli):
    turns = [call("write_file", path="notes.md", content="x"),
             call("submit_output", content='{"n": 3}', artifacts=["notes.md"]), say("done")]
    proc, run_id = cli.run(OUTPUT_AGENT, turns)
    assert proc.returncode == 0, err(proc)
    shown = cli.lev("result", run_id, "--json")
    assert shown.returncode == 0
    record = json.loads(shown.stdout)
    submitted_at = cli.meta(run_id)["final_output"]["submitted_at"]
    assert record == {
        "content": '{"n": 3}',
        "format": "json",
        "stage": "answer",
        "submitted_at": submitted_at,
        "truncated": False,
        "artifacts": ["notes.md"],
    }
    assert list(record) == ["content", "format", "stage", "submitted_at", "truncated", "artifacts"]


def test_result_default_lists_the_files_produced(cli):
    turns = [call("submit_output", content='{"n": 4}', artifacts=["a.csv", "out/b.md"]), say("done")]
    _proc, run_id = cli.run(OUTPUT_AGENT, turns)
    text = cli.lev("result", run_id).stdout.decode()
    assert text.endswith('{"n": 4}\n\nFiles produced (2):\n  a.csv\n  out/b.md\n')


def test_result_marks_a_truncated_answer(cli):
    toml = OUTPUT_AGENT.replace('[agent.output]\nformat = "json"\n\n[agent.output.schema]\ntype = "object"\n'
                                'required = ["n"]\n', "")
    long = "€" * (MAX_FINAL_OUTPUT_BYTES // 3 + 100)
    proc, run_id = cli.run(toml, [call("submit_output", content=long), say("done")])
    assert proc.returncode == 0, err(proc)
    text = cli.lev("result", run_id).stdout.decode()
    assert text.startswith(f"Final output from run '{run_id}', stage 'answer':\n\n€€€")
    assert text.endswith("\n[truncated: the agent's answer was longer than the size limit and was cut short]\n")
    raw = cli.lev("result", run_id, "--raw").stdout
    assert len(raw) <= MAX_FINAL_OUTPUT_BYTES + 1
    assert raw.decode("utf-8").rstrip("\n") == long[: len(raw) // 3]
    assert json.loads(cli.lev("result", run_id, "--json").stdout)["truncated"] is True


def test_result_accepts_a_unique_prefix(cli):
    _proc, run_id = cli.run(OUTPUT_AGENT, [call("submit_output", content='{"n": 5}'), say("done")])
    prefix = run_id[: len("answerer-") + 6]
    assert cli.lev("result", prefix, "--raw").stdout == b'{"n": 5}\n'


def test_result_of_a_run_without_an_answer_fails_saying_why(cli):
    proc, run_id = cli.run(WRITER_AGENT, [say("nothing to do")])
    assert proc.returncode == 0, err(proc)
    shown = cli.lev("result", run_id)
    assert shown.returncode == 1
    assert shown.stdout == b""
    message = err(shown)
    assert f"run '{run_id}' produced no final output (status: complete (no output))" in message
    assert "submit_output" in message


def test_result_of_an_unknown_run_fails(cli):
    shown = cli.lev("result", "no-such-run")
    assert shown.returncode == 1
    assert "no-such-run" in err(shown)
    assert "Traceback" not in err(shown)


def test_raw_and_json_cannot_be_combined(cli):
    shown = cli.lev("result", "x", "--raw", "--json")
    assert shown.returncode == 2


# ------------------------------------------------------------------------- lev run output flags
PLAIN_AGENT = """
[agent]
name = "plain"

[stages.answer]
mode = "output"
available_tools = ["submit_output"]
system_prompt = "Lead with the diagnosis."
nudge = { enabled = false }
[stages.answer.transitions]
"""


def first_system(cli: Cli, run_id: str) -> str:
    lines = (cli.home / "runs" / run_id / "transcript.jsonl").read_text().splitlines()
    return "\n".join(json.loads(lines[0])["system"])


def test_run_output_format_and_instructions_reach_the_model_and_the_record(cli):
    turns = [call("submit_output", content="<findings><finding severity='low'/></findings>"), say("done")]
    proc, run_id = cli.run(PLAIN_AGENT, turns, "--output-format", "xml",
                           "--output-instructions", "One <finding> element per issue.")
    assert proc.returncode == 0, err(proc)
    meta = cli.meta(run_id)
    assert meta["output_request"] == {"format": "xml", "instructions": "One <finding> element per issue."}
    assert meta["final_output"]["format"] == "xml"
    system = first_system(cli, run_id)
    assert "Return it in this format: xml." in system
    assert "One <finding> element per issue." in system
    assert system.index("Lead with the diagnosis.") < system.index("This governs how the answer is presented.")
    assert cli.lev("result", run_id, "--raw").stdout == b"<findings><finding severity='low'/></findings>\n"


def test_run_output_format_refuses_an_answer_in_another_format_then_takes_the_right_one(cli):
    turns = [call("submit_output", content='{"not": "xml"}'), call("submit_output", content="<ok/>"), say("done")]
    proc, run_id = cli.run(PLAIN_AGENT, turns, "--output-format", "xml")
    assert proc.returncode == 0, err(proc)
    events = [json.loads(line) for line in (cli.home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    rejected = [e for e in events if e["type"] == "output_rejected"]
    assert len(rejected) == 1 and "not valid xml" in rejected[0]["reason"]
    assert cli.lev("result", run_id, "--raw").stdout == b"<ok/>\n"


SCHEMA = {"type": "object", "required": ["count"], "properties": {"count": {"type": "integer"}}}


@pytest.mark.parametrize("as_file", [False, True])
def test_run_output_schema_from_json_text_or_a_file(cli, as_file):
    value = json.dumps(SCHEMA)
    if as_file:
        path = cli.tmp / "schema.json"
        path.write_text(value)
        value = f"@{path}"
    turns = [call("submit_output", content='{"count": "many"}'), call("submit_output", content='{"count": 7}'),
             say("done")]
    proc, run_id = cli.run(PLAIN_AGENT, turns, "--output-format", "json", "--output-schema", value)
    assert proc.returncode == 0, err(proc)
    assert cli.meta(run_id)["output_request"] == {"format": "json", "schema": SCHEMA}
    assert cli.lev("result", run_id, "--raw").stdout == b'{"count": 7}\n'
    assert '"count"' in first_system(cli, run_id)


def test_run_output_format_drops_the_blueprint_schema(cli):
    proc, run_id = cli.run(OUTPUT_AGENT, [call("submit_output", content="no: schema"), say("done")],
                           "--output-format", "yaml")
    assert proc.returncode == 0, err(proc)
    assert json.loads(cli.lev("result", run_id, "--json").stdout)["format"] == "yaml"


@pytest.mark.parametrize("value,needle", [("{not json", "--output-schema is not valid JSON"),
                                          ("@missing-schema.json", "cannot read --output-schema")])
def test_a_bad_output_schema_is_a_usage_error(cli, value, needle):
    script = cli.script([say("never used")])
    proc = cli.lev("run", str(cli.agent(PLAIN_AGENT)), "--task", "t", "--model", f"scripted:{script}",
                   "--output-schema", value)
    assert proc.returncode == 2
    assert needle in err(proc)
    assert "Traceback" not in err(proc)
    assert not (cli.home / "runs").exists() or not any((cli.home / "runs").iterdir())


def test_a_run_owing_an_answer_completes_with_output_forced(cli):
    # A missing output never strands a run (issue 24): it completes, and says what was forced.
    proc, run_id = cli.run(PLAIN_AGENT, [say("a"), say("b"), say("c"), say("d")])
    assert proc.returncode == 0, err(proc)
    meta = cli.meta(run_id)
    assert meta["status"] == "complete"
    assert meta["flags"]["output_forced"] == 1
    assert cli.lev("result", run_id).returncode == 1  # there is no answer to show


def test_a_broken_launch_free_validator_in_the_folder_fails_before_running(cli):
    toml = PLAIN_AGENT.replace("[stages.answer.transitions]",
                               '[stages.answer.output]\nvalidator = "v.rhai"\n[stages.answer.transitions]')
    folder = cli.agent(toml)
    (folder / "v.rhai").write_text("fn validate(content) { let = ; }\n")
    script = cli.script([say("never used")])
    proc = cli.lev("run", str(folder), "--task", "t", "--model", f"scripted:{script}")
    assert proc.returncode == 1
    assert "v.rhai" in err(proc)
    assert "Traceback" not in err(proc)


# ------------------------------------------------------------------------- lev ps
def ps_rows(cli: Cli) -> dict[str, dict[str, Any]]:
    proc = cli.lev("ps", "--json", "--all")
    assert proc.returncode == 0, err(proc)
    data = json.loads(proc.stdout)
    return {row["run_id"]: row for row in data["runs"] + data["finished"]}


@pytest.mark.usefixtures("blueprint_permissions")
def test_ps_shows_complete_no_output_for_a_run_that_left_nothing(cli):
    runs = [
        cli.run(WRITER_AGENT, [say("nothing")]),
        cli.run(OUTPUT_AGENT, [call("submit_output", content='{"n": 1}'), say("done")]),
        cli.run(WRITER_AGENT, [call("write_file", path="f.txt", content="x"), say("done")]),
    ]
    assert [proc.returncode for proc, _ in runs] == [0, 0, 0]
    empty_id, answered_id, wrote_id = (run_id for _, run_id in runs)
    rows = ps_rows(cli)
    assert rows[empty_id]["status_text"] == "complete (no output)"
    assert rows[empty_id]["empty_output"] is True
    assert rows[empty_id]["has_final_output"] is False
    assert rows[answered_id]["status_text"] == "complete"  # an answer counts as output
    assert rows[answered_id]["has_final_output"] is True
    assert rows[answered_id]["empty_output"] is False
    assert rows[wrote_id]["status_text"] == "complete"
    table = cli.lev("ps", "--all").stdout.decode()
    empty_line = next(line for line in table.splitlines() if line.startswith(empty_id))
    assert "complete (no output)" in empty_line
    answered_line = next(line for line in table.splitlines() if line.startswith(answered_id))
    assert "complete" in answered_line and "(no output)" not in answered_line


def test_ps_shows_a_forced_run_without_output(cli):
    toml = PLAIN_AGENT.replace("[agent]", '[tool_permissions]\nwrite_file = "allow"\n\n[agent]', 1)
    toml = toml.replace('available_tools = ["submit_output"]', 'available_tools = ["submit_output", "write_file"]')
    _proc, run_id = cli.run(toml, [say("a"), say("b"), say("c"), say("d")])
    row = ps_rows(cli)[run_id]
    assert row["status_text"] == "complete (no output)"


@pytest.mark.parametrize("setup,run_id,needle", [
    ("broken", "broken-1", "cannot be read"),
    ("missing", "missing-1", "cannot be read"),
    (None, "..", "is not a run id"),
])
def test_result_of_an_unreadable_record_is_a_clear_error(cli, setup, run_id, needle):
    folder = cli.home / "runs" / run_id
    if setup:
        folder.mkdir(parents=True)
        if setup == "broken":
            (folder / "meta.json").write_text("{not json")
    else:
        (cli.home / "runs").mkdir(parents=True)
    shown = cli.lev("result", run_id)
    assert shown.returncode == 1
    assert needle in err(shown)
    assert "Traceback" not in err(shown)

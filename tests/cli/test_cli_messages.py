"""Every message a newcomer meets in the first hour (issue 11): each is one line on stderr, with an
exact exit status, no traceback, and nothing half-written in the run store. The commands run in
this process (the ``lev`` fixture)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import BLUEPRINTS, FIXTURES, Lev

TRIAGE = str(BLUEPRINTS / "triage")

INPUTS_AGENT = """
[agent]
name = "reviewer"
[context.regions]
system = { kind = "pinned", max_tokens = 1000 }
diff = { kind = "pinned", max_tokens = 1000, seed = "input", required = true }
criteria = { kind = "pinned", max_tokens = 1000, seed = "input" }
[stages.review]
mode = "output"
model = { provider = "anthropic", model = "claude-sonnet-4-6" }
max_iterations = 3
[stages.review.transitions]
"""


@pytest.fixture()
def reviewer(tmp_path: Path) -> Path:
    folder = tmp_path / "reviewer"
    folder.mkdir()
    (folder / "agent.leviath").write_text(INPUTS_AGENT, encoding="utf-8")
    return folder


def one_line(out, code: int) -> str:
    """The single stderr line of a command that must fail with ``code``."""
    assert out.returncode == code, (out.returncode, out.stderr)
    assert out.stderr.count("\n") == 1 and out.stderr.endswith("\n"), out.stderr
    assert "Traceback" not in out.stderr
    return out.stderr.rstrip("\n")


def no_record(home: Path) -> None:
    runs = home / "runs"
    assert not runs.exists() or not any(runs.iterdir())


# ------------------------------------------------------------------------------------------------
# lev run: options and inputs
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--modle", "mock"], "lev run: unknown option --modle (did you mean --model?)"),
        (["--quite"], "lev run: unknown option --quite (did you mean --quiet?)"),
        (["--output_format=json"], "lev run: unknown option --output_format (did you mean --output-format?)"),
        (["--flavour", "red"], "lev run: unknown option --flavour: it is not an option of lev run, and blueprint "
                              "'triage' has no such input (it declares no inputs besides --task; see lev run --help)"),
    ],
)
def test_an_unknown_option_is_an_error_with_a_guess(lev: Lev, home: Path, args: list[str], message: str) -> None:
    out = lev("run", TRIAGE, "--task", "hi", *args)
    assert one_line(out, 2) == message
    no_record(home)


def test_an_unknown_option_before_the_path_does_not_eat_it(lev: Lev, home: Path) -> None:
    out = lev("run", "--modle", "mock", TRIAGE, "--task", "hi")
    assert one_line(out, 2) == "lev run: unknown option --modle (did you mean --model?)"


def test_a_misspelt_input_gets_a_guess_among_the_inputs(lev: Lev, home: Path, reviewer: Path) -> None:
    out = lev("run", str(reviewer), "--dif", "x", "--model", "mock")
    assert one_line(out, 2) == "lev run: unknown option --dif (did you mean --diff?)"
    out = lev("run", str(reviewer), "--flavour", "x", "--model", "mock")
    assert one_line(out, 2) == (
        "lev run: unknown option --flavour: it is not an option of lev run, and blueprint 'reviewer' has no such "
        "input (its inputs are --diff, --criteria; see lev run --help)")
    no_record(home)


def test_an_input_with_no_value(lev: Lev, reviewer: Path) -> None:
    out = lev("run", str(reviewer), "--model", "mock", "--diff")
    assert one_line(out, 2) == "lev run: --diff needs a value (TEXT, or @FILE to read it from a file)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["valdate", TRIAGE], "lev: unknown command 'valdate' (did you mean 'validate'?); `lev --help` lists every command"),
        (["-v", "grph", TRIAGE], "lev: unknown command 'grph' (did you mean 'graph'?); `lev --help` lists every command"),
        (["help"], "lev: unknown command 'help'; `lev --help` lists every command"),
        # A word another tool uses for the same thing gets the command, not the nearest spelling.
        (["agents"], "lev: unknown command 'agents' (did you mean 'list'?); `lev --help` lists every command"),
        (["install", TRIAGE], "lev: unknown command 'install' (did you mean 'add'?); `lev --help` lists every command"),
        (["Status"], "lev: unknown command 'Status' (did you mean 'ps'?); `lev --help` lists every command"),
    ],
)
def test_a_misspelt_command_gets_a_guess_not_the_list_of_every_command(lev: Lev, home: Path, args: list[str],
                                                                        message: str) -> None:
    assert one_line(lev(*args), 2) == message
    no_record(home)


def test_other_commands_guess_a_misspelt_option(lev: Lev) -> None:
    out = lev("ps", "--jsno")
    assert out.returncode == 2 and out.stderr.splitlines()[-1] == (
        "lev ps: error: unrecognized arguments: --jsno (did you mean --json?)")


# ------------------------------------------------------------------------------------------------
# lev run: the run-start checks, before the run exists
# ------------------------------------------------------------------------------------------------
def test_no_api_key_is_one_message_naming_the_stages(lev: Lev, home: Path) -> None:
    out = lev("run", TRIAGE, "--task", "hi")
    assert one_line(out, 2) == (
        "lev run: no API key for anthropic: ANTHROPIC_API_KEY is not set, and stages 'read', 'check', "
        "'table_after_error', 'table' of blueprint 'triage' run on anthropic models; export "
        "ANTHROPIC_API_KEY=<your key>, or try the agent offline with --model mock")
    no_record(home)


@pytest.mark.parametrize(("command", "actions"), [("models", "list or show"), ("policy", "list, add or test")])
def test_a_command_without_its_action_names_the_actions(lev: Lev, command: str, actions: str) -> None:
    assert one_line(lev(command), 2) == f"lev {command}: say {actions} (lev {command} --help)"


def test_an_unknown_provider_lists_the_known_ones(lev: Lev, home: Path) -> None:
    out = lev("run", TRIAGE, "--task", "hi", "--model", "antropic/claude-x")
    assert one_line(out, 2) == (
        "lev run: model 'antropic/claude-x' names the provider 'antropic', which lev_nb cannot call (did you "
        "mean 'anthropic'?); the providers it calls are anthropic, mock, ollama, openai, openrouter; pass --model PROVIDER/MODEL with one "
        "of them, or --model mock for a dry run")
    no_record(home)


def test_a_task_where_no_region_takes_it_is_refused(lev: Lev, home: Path, reviewer: Path) -> None:
    out = lev("run", str(reviewer), "--task", "review it", "--diff", "+1", "--model", "mock")
    assert one_line(out, 2) == (
        "lev run: blueprint 'reviewer' takes no task: no region of it is filled from the task, and its inputs "
        "are 'diff', 'criteria'; leave out --task and pass --diff TEXT, --criteria TEXT")
    no_record(home)


def test_a_missing_required_input_is_refused(lev: Lev, home: Path, reviewer: Path) -> None:
    out = lev("run", str(reviewer), "--criteria", "strict", "--model", "mock")
    assert one_line(out, 2) == (
        "lev run: blueprint 'reviewer' needs the input 'diff': it fills the required region 'diff'; pass "
        "--diff TEXT (or @FILE to read it from a file)")
    no_record(home)


def test_an_input_from_a_file(lev: Lev, tmp_path: Path, reviewer: Path) -> None:
    (tmp_path / "change.patch").write_text("+ one line", encoding="utf-8")
    out = lev("run", str(reviewer), "--diff", f"@{tmp_path / 'change.patch'}", "--model", "mock", "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


def test_a_misspelt_output_format_is_refused_and_a_label_of_ones_own_is_not(lev: Lev, home: Path) -> None:
    out = lev("run", TRIAGE, "--task", "hi", "--model", "mock", "--output-format", "cvs")
    assert one_line(out, 2) == (
        "lev run: output format 'cvs' looks like a misspelling of 'csv' (lev_nb checks answers in json, xml, "
        "yaml, csv and toml; any other label is passed to the model as written); pass --output-format csv")
    no_record(home)
    out = lev("run", TRIAGE, "--task", "hi", "--model", "mock", "--output-format", "nonsense", "--quiet")
    assert out.returncode == 0, out.stderr


def test_a_bad_model_spec_is_one_line(lev: Lev, home: Path) -> None:
    out = lev("run", TRIAGE, "--task", "hi", "--model", "nonsense")
    assert one_line(out, 2).startswith("lev run: model 'nonsense' is not a model spec; use 'mock'")
    no_record(home)


def test_a_workdir_that_is_a_file(lev: Lev, home: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    out = lev("run", TRIAGE, "--task", "hi", "--model", "mock", "--workdir", str(tmp_path / "f"))
    assert one_line(out, 2) == (
        f"lev run: the working directory '{tmp_path / 'f'}' is a file, not a folder; pass --workdir with a folder")
    no_record(home)


# ------------------------------------------------------------------------------------------------
# Paths, lev validate
# ------------------------------------------------------------------------------------------------
def test_a_missing_path_is_named_once(lev: Lev, tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    out = lev("validate", str(missing))
    hint = " (pass an agent folder or its agent.leviath file)"
    assert one_line(out, 1) == f"Error: No agent.leviath found at {missing}: no such file or folder{hint}"
    out = lev("validate", str(missing / "agent.leviath"))
    assert one_line(out, 1) == (
        f"Error: No agent.leviath found at {missing / 'agent.leviath'}: there is no folder {missing}{hint}")
    out = lev("run", str(missing), "--task", "hi", "--model", "mock")
    line = one_line(out, 1)
    assert line == (f"lev run: No agent.leviath found at {missing}: no such file or folder (pass an agent "
                    "folder or its agent.leviath file)")
    assert line.count(str(missing)) == 1
    out = lev("graph", str(tmp_path))
    assert one_line(out, 1) == (f"lev graph: No agent.leviath found at {tmp_path}: the folder has no agent.leviath "
                                "in it (pass an agent folder or its agent.leviath file)")


def test_validate_never_says_valid_above_an_error(lev: Lev, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # a reachable provider: no-reachable-provider is not tested here
    out = lev("validate", str(FIXTURES / "lints" / "unknown-tool"))
    assert out.returncode == 1
    assert out.stdout.splitlines()[0] == "✗ Blueprint 'lint-fixture' is not valid: 1 error below."
    assert "is valid" not in out.stdout
    assert one_line(out, 1) == "Error: ✗ Blueprint has 1 error"
    out = lev("validate", "--deny-warnings", str(FIXTURES / "lints" / "stage-missing-mode"))
    assert out.stdout.splitlines()[0] == (
        "✗ Blueprint 'lint-fixture' is not valid: 1 warning (--deny-warnings) below.")


def test_validate_names_unknown_keys_with_a_guess(lev: Lev) -> None:
    out = lev("validate", str(FIXTURES / "lints" / "unknown-key"))
    assert out.returncode == 0
    assert "[agent] has the key 'nmae', which nothing reads, so it is ignored [unknown-key]" in out.stdout
    assert "did you mean 'name'?" in out.stdout and "did you mean 'max_tokens'?" in out.stdout
    assert "the top level has the key 'stage'" in out.stdout and "did you mean 'stages'?" in out.stdout


# ------------------------------------------------------------------------------------------------
# --webhook
# ------------------------------------------------------------------------------------------------
@pytest.fixture()
def failing_hook() -> Iterator[str]:
    """A local server that answers every POST with HTTP 500."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def test_a_failed_webhook_is_reported_and_fails_the_command(lev: Lev, home: Path, failing_hook: str) -> None:
    out = lev("run", TRIAGE, "--task", "hi", "--model", "mock", "--quiet", "--webhook", failing_hook)
    assert one_line(out, 1) == ("lev run: the result was not delivered to the webhook: the webhook answered HTTP 500 "
                                "(after 4 attempts)")  # [webhook] max_retries = 3 by default
    meta = json.loads((home / "runs" / out.stdout.strip() / "meta.json").read_text())
    assert meta["status"] == "complete"  # the run itself is fine; only the delivery failed


def test_an_unreachable_webhook_is_reported(lev: Lev) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = lev("run", TRIAGE, "--task", "hi", "--model", "mock", "--quiet", "--webhook", f"http://127.0.0.1:{port}/")
    assert one_line(out, 1) == (f"lev run: the result was not delivered to the webhook: could not reach "
                                f"'http://127.0.0.1:{port}/': Connection refused (after 4 attempts)")


def test_a_webhook_that_is_not_a_url(lev: Lev, home: Path) -> None:
    out = lev("run", TRIAGE, "--task", "hi", "--model", "mock", "--webhook", "example.org/hook")
    assert one_line(out, 2) == ("lev run: the webhook 'example.org/hook' is not an http:// or https:// URL; "
                                "pass --webhook http://HOST/PATH")
    no_record(home)


# ------------------------------------------------------------------------------------------------
# How a run that does not complete is reported
# ------------------------------------------------------------------------------------------------
def test_a_failed_run_says_its_error_once_in_full(lev: Lev, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    reason = ("HTTP 400: the provider refused the request because its messages are malformed in a way that "
              "the provider explains at some length, more than a progress line holds")
    script.write_text(json.dumps([{"error": {"kind": "api", "message": reason}}] * 4), encoding="utf-8")
    out = lev("run", TRIAGE, "--task", "hi", "--model", f"scripted:{script}")
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert lines[-1].startswith("lev run: the run ended error: ") and reason in lines[-1]
    assert sum(reason in line for line in lines) == 1  # progress lines cut it at a word, with an ellipsis
    progress_errors = [line for line in lines[:-1] if " · error: " in line]
    assert progress_errors and all(line.endswith(" …") for line in progress_errors)


def test_a_paused_run_says_why_and_how_to_resume_it(lev: Lev, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    reason = "the account has run out of credits for this month"
    script.write_text(json.dumps([{"error": {"kind": "credits", "message": reason}}]), encoding="utf-8")
    out = lev("run", TRIAGE, "--task", "hi", "--model", f"scripted:{script}")
    assert out.returncode == 3, out.stderr
    run_id = out.stdout.strip()
    last = out.stderr.splitlines()[-1]
    assert last.startswith("lev run: the run paused in stage ") and reason in last
    assert "top up the account" in last and f"lev resume {run_id}" in last
    ps = lev("ps")
    row = next(line for line in ps.stdout.splitlines() if line.startswith(run_id))
    assert "paused: needs credits" in row


def test_progress_details_are_cut_at_a_word() -> None:
    from lev_nb.cli.progress import _short

    assert _short("short and sweet") == "short and sweet"
    long = "word " * 40
    cut = _short(long, limit=30)
    assert cut == "word word word word word word …" and len(cut) <= 32


def test_lev_resume_continues_a_paused_run_with_progress_from_where_it_resumes(lev: Lev, tmp_path: Path) -> None:
    empty, answer = tmp_path / "empty.json", tmp_path / "answer.json"
    empty.write_text(json.dumps([{"error": {"kind": "credits", "message": "credit balance too low"}}]), encoding="utf-8")
    answer.write_text(json.dumps([{"error": {"kind": "credits", "message": "still too low"}}]), encoding="utf-8")
    run_id = lev("run", TRIAGE, "--task", "hi", "--model", f"scripted:{empty}").stdout.strip()
    again = lev("resume", run_id, "--model", f"scripted:{answer}")
    assert again.returncode == 3 and again.stdout.strip() == run_id
    assert again.stderr.splitlines()[-1].startswith("lev resume: the run paused in stage 'read'")
    assert "credit balance too low" not in again.stderr  # the first life's progress is not told again
    assert "still too low" in again.stderr
    done = lev("resume", run_id[:16], "--model", "mock")
    assert done.returncode == 0, done.stderr
    assert lev("resume", run_id).stderr.startswith(f"lev resume: run '{run_id}' ended (complete)")


def test_every_synonym_names_a_command_and_hides_none() -> None:
    from lev_nb.cli.app import COMMANDS, SYNONYMS

    names = {name for name, _, _ in COMMANDS}
    assert set(SYNONYMS.values()) <= names
    assert not set(SYNONYMS) & names
    assert all(word == word.lower() for word in SYNONYMS)  # looked up in lower case

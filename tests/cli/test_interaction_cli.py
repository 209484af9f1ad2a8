"""A person in the loop at the command line: ``lev run`` asks at a terminal (a real process on a
pseudo-terminal), ``lev msg`` and ``lev respond`` reach a ``lev run`` in another process, ``lev ps``
shows a run that waits for a person, and ``--allow`` / ``--yolo`` / the message without a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

WAIT_S = 60  # generous: only a hung process takes this long

AGENT = """
[agent]
name = "asker"
[stages.work]
model = { provider = "anthropic", model = "m" }
available_tools = ["write_file", "ask_user_choice", "ask_user_text"]
allow_blocking_tools = true
[stages.work.transitions]
"""


def agent(tmp_path: Path, turns: list[dict[str, Any]]) -> tuple[Path, Path]:
    """An agent folder and a scripted model file for it."""
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    (folder / "agent.leviath").write_text(AGENT, encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns), encoding="utf-8")
    return folder, script


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


class Terminal:
    """``lev run`` in a real process whose stdin, stdout and stderr are a pseudo-terminal."""

    def __init__(self, tmp_path: Path, *args: str, command: str = "run") -> None:
        self.home = tmp_path / "home"
        env = {**os.environ, "LEV_HOME": str(self.home), "COLUMNS": "200"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become `lev run` (or `lev resume`)
            os.execvpe(sys.executable, [sys.executable, "-m", "lev_nb.cli", command, *args], env)
        self.seen = b""
        self.status: int | None = None

    def read_until(self, token: bytes) -> bytes:
        """Everything up to and including ``token``, waiting for it (fails if the process ends first)."""
        deadline = time.monotonic() + WAIT_S
        while token not in self.seen:
            assert time.monotonic() < deadline, f"never saw {token!r}; got {self.seen.decode(errors='replace')}"
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                assert chunk, f"the process ended before {token!r}; got {self.seen.decode(errors='replace')}"
                self.seen += chunk
        return self.seen

    def type(self, text: bytes) -> None:
        os.write(self.fd, text)

    def finish(self) -> int:
        """Read to the end and return the exit status."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.seen += chunk
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def run_dir(self) -> Path:
        """The run's folder, once it exists."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            runs = list((self.home / "runs").glob("*/meta.json")) if (self.home / "runs").is_dir() else []
            if runs:
                return runs[0].parent
            time.sleep(0.05)
        raise AssertionError("the run never started")


@pytest.fixture
def terminal(tmp_path: Path):
    made: list[Terminal] = []

    def start(*args: str, command: str = "run") -> Terminal:
        made.append(Terminal(tmp_path, *args, command=command))
        return made[-1]

    yield start
    for term in made:
        term.kill()


def lev(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEV_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "lev_nb.cli", *args], env=env, text=True,
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=WAIT_S)


def test_lev_run_at_a_terminal_asks_and_takes_the_answers(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [
        tool("write_file", path="a.txt", content="hi"),
        tool("ask_user_choice", prompt="Colour?", options=["red", "green"]),
        tool("write_file", path="b.txt", content="ho"),
        {"text": "done"},
    ])
    work = tmp_path / "work"
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work))
    seen = term.read_until(b"[r] for this run, [n] no: ")
    assert b"the agent wants to run 'write_file'" in seen and b"path: a.txt" in seen
    term.type(b"r\n")
    seen = term.read_until(b"Pick 1-2: ")
    assert b"1) red" in seen and b"2) green" in seen
    term.type(b"2\n")
    assert term.finish() == 0
    # Allowed for the run: the second write_file was not asked about.
    assert term.seen.count(b"the agent wants to run") == 1
    assert (work / "a.txt").read_text() == "hi" and (work / "b.txt").read_text() == "ho"
    # Nothing drew over a question: what follows each question on the terminal is the typed answer.
    assert term.seen.split(b"[n] no: ")[1].startswith(b"r") and term.seen.split(b"Pick 1-2: ")[1].startswith(b"2")
    events = [json.loads(line) for line in next((tmp_path / "home" / "runs").iterdir()).joinpath("events.jsonl").read_text().splitlines()]
    assert [e["source"] for e in events if e["type"] == "interaction_resolved"] == ["terminal", "terminal"]


def test_a_bad_answer_at_the_terminal_is_asked_again(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [tool("ask_user_choice", prompt="Colour?", options=["red", "green"]), {"text": "ok"}])
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}")
    term.read_until(b"Pick 1-2: ")
    term.type(b"7\n")
    term.read_until(b"pick a number from 1 to 2")
    term.type(b"red\n")
    assert term.finish() == 0


def test_ctrl_c_at_a_question_stops_the_run_resumably(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [tool("ask_user_text", prompt="Name?"), {"text": "ok"}])
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}")
    term.read_until(b"Your answer (Enter: no answer): ")
    term.type(b"\x03")  # the terminal turns it into SIGINT
    assert term.finish() == 130
    meta = json.loads(next(term.run_dir().parent.iterdir()).joinpath("meta.json").read_text())
    assert meta["status"] == "paused" and meta["needs_setup"]["blocker"] == "interrupted" and meta["pending"] == []


def test_lev_msg_and_lev_respond_reach_a_run_in_another_process(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [tool("ask_user_text", prompt="Name?"), {"text": "done"}])
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}")
    term.read_until(b"Your answer (Enter: no answer): ")
    run_id = term.run_dir().name
    ps = lev(tmp_path, "ps")
    assert run_id in ps.stdout and "waiting: user prompt" in ps.stdout
    listed = lev(tmp_path, "respond", run_id)
    request_id = f"ask-{json.loads((term.run_dir() / 'meta.json').read_text())['pending'][0]['id'][4:]}"
    assert request_id in listed.stdout and "Name?" in listed.stdout
    sent = lev(tmp_path, "msg", run_id[:20], "Keep it short")
    assert sent.returncode == 0 and "message sent" in sent.stdout
    kind = lev(tmp_path, "respond", run_id, request_id, "--approve")
    assert kind.returncode == 1 and "is a text request, not a tool approval" in kind.stderr
    wrong = lev(tmp_path, "respond", run_id, "nope", "x")
    assert wrong.returncode == 1 and f"has no open request 'nope' (open: {request_id})" in wrong.stderr
    answered = lev(tmp_path, "respond", run_id, request_id, "Ada")
    assert answered.returncode == 0, answered.stderr
    assert f"answered {request_id}" in answered.stdout
    term.read_until(b"(answered elsewhere)")
    assert term.finish() == 0
    events = [json.loads(line) for line in (term.run_dir() / "events.jsonl").read_text().splitlines()]
    resolved = [e for e in events if e["type"] == "interaction_resolved"]
    assert [(e["source"], e["answer"]) for e in resolved] == [("inbox", "Ada")]
    messages = [(e["status"], e["text"], e["source"]) for e in events if e["type"] == "message"]
    assert messages == [("delivered", "Keep it short", "inbox")]
    transcript = (term.run_dir() / "transcript.jsonl").read_text()
    assert "Keep it short" in transcript and "Ada" in transcript
    # The run has ended: nothing reaches it any more.
    late = lev(tmp_path, "msg", run_id, "hello?")
    assert late.returncode == 1 and "is not running (status: complete" in late.stderr
    late = lev(tmp_path, "respond", run_id, request_id, "again")
    assert late.returncode == 1 and "is not running" in late.stderr


def test_lev_msg_to_an_unknown_run(tmp_path: Path):
    result = lev(tmp_path, "msg", "no-such-run", "hi")
    assert result.returncode == 1 and result.stderr.startswith("lev msg: no run id starts with 'no-such-run'")
    assert "Traceback" not in result.stderr
    result = lev(tmp_path, "respond")
    assert result.returncode == 0 and "no run is waiting for an answer" in result.stdout


def test_lev_respond_checks_the_answer_before_sending_it(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [tool("ask_user_choice", prompt="Colour?", options=["red", "green"]), {"text": "ok"}])
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}")
    term.read_until(b"Pick 1-2: ")
    run_id = term.run_dir().name
    request_id = json.loads((term.run_dir() / "meta.json").read_text())["pending"][0]["id"]
    bad = lev(tmp_path, "respond", run_id, request_id, "--choice", "9")
    assert bad.returncode == 1 and "out of range" in bad.stderr
    assert not list((term.run_dir() / "inbox").glob("*.json")) if (term.run_dir() / "inbox").exists() else True
    good = lev(tmp_path, "respond", run_id, request_id, "--choice", "1")
    assert good.returncode == 0, good.stderr
    assert term.finish() == 0


# -- without a terminal ----------------------------------------------------------------------------
def test_without_a_terminal_an_ask_tool_is_denied_with_how_to_allow_it(tmp_path: Path):
    folder, script = agent(tmp_path, [tool("write_file", path="a.txt", content="hi"), {"text": "ok"}])
    work = tmp_path / "work"
    result = lev(tmp_path, "run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work))
    assert result.returncode == 0 and not (work / "a.txt").exists()
    run_dir = tmp_path / "home" / "runs" / result.stdout.strip()
    finished = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if '"tool_finished"' in line]
    assert "--allow write_file" in finished[0]["summary"]


@pytest.mark.parametrize("flags", [("--allow", "write_file"), ("--yolo",)])
def test_allow_and_yolo_at_launch(tmp_path: Path, flags: tuple[str, ...]):
    folder, script = agent(tmp_path, [tool("write_file", path="a.txt", content="hi"), {"text": "ok"}])
    work = tmp_path / "work"
    result = lev(tmp_path, "run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work),
                 "--json", *flags)
    assert result.returncode == 0, result.stderr
    assert (work / "a.txt").read_text() == "hi"
    meta = json.loads(result.stdout)
    assert meta["yolo"] is (flags == ("--yolo",)) and meta["allowed_tools"] == (["write_file"] if "--allow" in flags else [])


def test_allow_names_a_real_tool(tmp_path: Path):
    folder, script = agent(tmp_path, [{"text": "ok"}])
    result = lev(tmp_path, "run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--allow", "write_flie")
    assert result.returncode == 2 and "did you mean 'write_file'" in result.stderr and "Traceback" not in result.stderr


def test_run_help_explains_the_person_in_the_loop(tmp_path: Path):
    text = lev(tmp_path, "run", "--help").stdout
    assert "--yolo" in text and "--allow TOOL" in text and "--unattended" in text and "lev respond" in text
    assert "respond" in lev(tmp_path, "--help").stdout and "msg" in lev(tmp_path, "--help").stdout


def test_lev_respond_approves_for_the_rest_of_the_run(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [tool("write_file", path="a.txt", content="1"),
                                      tool("write_file", path="b.txt", content="2"), {"text": "ok"}])
    work = tmp_path / "work"
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work))
    term.read_until(b"[n] no: ")
    run_id = term.run_dir().name
    request_id = json.loads((term.run_dir() / "meta.json").read_text())["pending"][0]["id"]
    assert "waiting: tool approval" in lev(tmp_path, "ps").stdout
    everything = lev(tmp_path, "respond")
    assert f"{run_id}  {request_id}  [approval] allow the tool 'write_file'?" in everything.stdout
    assert json.loads(lev(tmp_path, "respond", "--json").stdout)[run_id][0]["tool"] == "write_file"
    bare = lev(tmp_path, "respond", run_id, request_id)
    assert bare.returncode == 1 and "--approve (add --stage or --run" in bare.stderr
    done = lev(tmp_path, "respond", run_id, request_id, "--approve", "--run")
    assert done.returncode == 0 and "allow (run)" in done.stdout, done.stderr
    assert term.finish() == 0
    assert (work / "a.txt").exists() and (work / "b.txt").exists()
    assert term.seen.count(b"the agent wants to run") == 1


def test_ctrl_d_at_a_question_declines_it(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [tool("ask_user_text", prompt="Name?"), {"text": "ok"}])
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}")
    term.read_until(b"Your answer (Enter: no answer): ")
    term.type(b"\x04")  # end of input at the start of a line
    assert term.finish() == 0
    assert b"(declined)" in term.seen
    events = [json.loads(line) for line in (term.run_dir() / "events.jsonl").read_text().splitlines()]
    assert [e["outcome"] for e in events if e["type"] == "interaction_resolved"] == ["declined"]


def test_two_answers_at_once_only_the_one_taken_says_answered(tmp_path: Path, terminal):
    # Two `lev respond`s read the open request before the run takes either answer: the run takes
    # the first and only warns in its record about the second, which used to print "answered" too.
    folder, script = agent(tmp_path, [tool("ask_user_text", prompt="Name?"), {"text": "ok"}])
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}")
    term.read_until(b"Your answer (Enter: no answer): ")
    run_dir = term.run_dir()
    request_id = json.loads((run_dir / "meta.json").read_text())["pending"][0]["id"]
    env = {**os.environ, "LEV_HOME": str(tmp_path / "home")}
    os.kill(term.pid, signal.SIGSTOP)  # the owner cannot look at its inbox until both are there
    try:
        first = subprocess.Popen([sys.executable, "-m", "lev_nb.cli", "respond", run_dir.name, request_id, "Ada"],
                                 env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + WAIT_S
        while not list((run_dir / "inbox").glob("*.json")) if (run_dir / "inbox").is_dir() else True:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = subprocess.Popen([sys.executable, "-m", "lev_nb.cli", "respond", run_dir.name, request_id, "Grace"],
                                  env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while len(list((run_dir / "inbox").glob("*.json"))) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.kill(term.pid, signal.SIGCONT)
    out1, err1 = first.communicate(timeout=WAIT_S)
    out2, err2 = second.communicate(timeout=WAIT_S)
    assert first.returncode == 0 and f"answered {request_id}" in out1, err1
    assert second.returncode == 1 and "answered" not in out2
    assert "settled by another answer first (Ada, from inbox); yours was not used" in err2
    assert term.finish() == 0


def test_lev_resume_at_a_terminal_asks_as_lev_run_does(tmp_path: Path, terminal):
    # lev resume never asked: a paused run resumed at a terminal had its write_file denied with
    # "this run has nobody to ask".
    folder, script = agent(tmp_path, [{"error": {"kind": "credits", "message": "credit balance too low"}}])
    work = tmp_path / "work"
    paused = lev(tmp_path, "run", str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work))
    assert paused.returncode == 3, paused.stderr
    run_id = paused.stdout.strip()
    then = tmp_path / "then.json"
    then.write_text(json.dumps([tool("write_file", path="a.txt", content="hi"), {"text": "done"}]), encoding="utf-8")
    term = terminal(run_id, "--model", f"scripted:{then}", command="resume")
    term.read_until(b"[n] no: ")
    term.type(b"y\n")
    assert term.finish() == 0, term.seen.decode(errors="replace")
    assert (work / "a.txt").read_text() == "hi"


def test_the_taint_gate_asks_at_the_terminal_like_any_approval(tmp_path: Path, terminal):
    folder, script = agent(tmp_path, [tool("read_file", path="notes.txt"),
                                      tool("shell", command="echo sent > out.txt"), {"text": "done"}])
    (folder / "agent.leviath").write_text(AGENT.replace(
        '["write_file", "ask_user_choice", "ask_user_text"]', '["read_file", "shell"]') + "[security]\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("internal notes")
    term = terminal(str(folder), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work),
                    "--allow", "shell", "--allow", "write_file")
    seen = term.read_until(b"[r] for this run, [n] no: ")
    assert b"the agent wants to run 'shell'" in seen and b"Taint gate: 'shell' would send internal data" in seen
    term.type(b"y\n")
    assert term.finish() == 0
    assert (work / "out.txt").exists()

"""Fault injection: each fault of issues 12 and 26 thrown at lev_nb, and what happened.

Every fault runs in a fresh child process (``faults.py --one NAME``), so a crash shows up as a row
("the process died") instead of ending the table. A row says what was injected, the input, the
outcome lev_nb gave, whether the outcome is the one it owes (``held``: no crash, no stall, no leak,
one clear error; ``None`` when the fault could not be tried here, a row counted as skipped, never as
held) and how long the child took. Runs, homes and working directories live in a
temporary folder; nothing reaches the network (the webhook receiver listens on 127.0.0.1).
Prints the table and writes bench/results/faults.json.

    .venv/bin/python bench/faults.py            # every fault
    .venv/bin/python bench/faults.py --one NAME # one fault, its row as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "faults.json"
CHILD_TIMEOUT_S = 180

Row = dict[str, Any]
FAULTS: dict[str, Callable[[Path], Row]] = {}


def fault(name: str) -> Callable[[Callable[[Path], Row]], Callable[[Path], Row]]:
    """Register a fault: a function of a scratch folder returning ``{input, outcome, held}``."""

    def register(fn: Callable[[Path], Row]) -> Callable[[Path], Row]:
        FAULTS[name] = fn
        return fn

    return register


# The scratch folder of the fault running in this process (set by :func:`one`).
_SCRATCH: Path | None = None


def _placeholders(text: str) -> str:
    """``text`` with no path of this machine: the scratch folder reads as TMP, a run's folder as RUN."""
    if _SCRATCH is not None:
        text = text.replace(str(_SCRATCH), "TMP")
    return re.sub(r"TMP/home/runs/[\w.-]+", "RUN", text)


def _short(text: Any, width: int = 110) -> str:
    """``text`` on one line, its machine paths replaced first (a cut path could not be found after),
    then cut to ``width``."""
    text = _placeholders(" ".join(str(text).split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def _blueprint(body: str) -> Any:
    import lev_nb

    return lev_nb.load('[agent]\nname = "faults"\n' + textwrap.dedent(body))


def _run(tmp: Path, body: str | Any, turns: Any, **kw: Any) -> Any:
    """Run a blueprint on scripted turns in ``tmp`` and wait for it."""
    from lev_nb.providers import ScriptedModel

    bp = _blueprint(body) if isinstance(body, str) else body
    work = Path(tempfile.mkdtemp(dir=tmp, prefix="work-"))
    model = turns if hasattr(turns, "complete") else ScriptedModel(turns)
    run = bp.run("the task", model=model, workdir=work, home=tmp / "home", **kw)
    run.wait(120)
    return run


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _say(text: str) -> dict[str, Any]:
    return {"text": text}


def _rhai(source: str, **limits: Any) -> tuple[str, bool]:
    """Evaluate on Engine(**limits): (what came back, whether it was a value or a Rhai error)."""
    from lev_nb.rhai import Engine, RhaiError

    try:
        value = Engine(**limits).eval(source)
        return f"value {_short(repr(value), 40)}", True
    except RhaiError as exc:
        return f"{type(exc).__name__}: {exc}", True
    except ValueError as exc:
        return f"ValueError: {exc}", True


ALLOW_SHELL = "[security]\nallow_blueprint_permissions = true\n"
SHELL_STAGE = """
[stages.work]
available_tools = ["shell", "list_dir"]
tool_permissions = { shell = "allow", write_file = "allow" }  # its commands redirect into files
nudge = { enabled = false }
[stages.work.transitions]
"""
QUICK = '[stages.work]\navailable_tools = ["list_dir", "read_file", "write_file"]\nnudge = { enabled = false }\n[stages.work.transitions]\n'


def _allow_shell(tmp: Path) -> None:
    (tmp / "home").mkdir(parents=True, exist_ok=True)
    (tmp / "home" / "config.toml").write_text(ALLOW_SHELL)


# ------------------------------------------------------------------------------------------------
# Rhai: hostile scripts and limits


@fault("rhai-deep-nesting")
def _deep(tmp: Path) -> Row:
    src = "let a = []; for i in 0..5000 { a = [a]; } a == a"
    outcome, ok = _rhai(src)
    return {"input": src, "outcome": outcome, "held": ok}


@fault("rhai-absurd-limits")
def _limits(tmp: Path) -> Row:
    from lev_nb.rhai import Engine

    try:
        Engine(max_call_levels=100_000)
        return {"input": "Engine(max_call_levels=100000)", "outcome": "accepted", "held": False}
    except ValueError as exc:
        return {"input": "Engine(max_call_levels=100000)", "outcome": f"ValueError: {exc}", "held": True}


@fault("rhai-join-bomb")
def _join(tmp: Path) -> Row:
    src = 'let s = ""; s.pad(999000, "x"); let a = []; a.pad(10000, 1); join(a, s).len()'
    outcome, ok = _rhai(src)
    return {"input": "join() of 10,000 items with a 1 MB separator (10 GB)", "outcome": outcome,
            "held": ok and "too large" in outcome}


@fault("rhai-closure-memory")
def _closures(tmp: Path) -> Row:
    src = ('let s = ""; s.pad(999000, "x"); let fs = []; for i in 0..1000 { let t = s; t += i; fs.push(|| t); } '
           "fs.len()")
    outcome, ok = _rhai(src)
    return {"input": "1,000 closures each holding a 1 MB string (1 GB)", "outcome": outcome,
            "held": ok and "max_memory" in outcome}


@fault("rhai-compile-bomb")
def _compile(tmp: Path) -> Row:
    from lev_nb.rhai import Engine, RhaiError

    source = "".join(f"fn f{i}(x){{x}}\n" for i in range(40_000))
    start = time.monotonic()
    try:
        Engine(timeout_ms=None, max_functions=100_000).compile(source)
        outcome = "compiled"
    except RhaiError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    took = time.monotonic() - start
    return {"input": "40,000 functions, max_functions raised, timeout_ms=None",
            "outcome": f"{outcome} after {took:.1f} s", "held": took < 6.5}


@fault("rhai-variables-bomb")
def _variables(tmp: Path) -> Row:
    from lev_nb.rhai import Engine, RhaiError

    source = "".join(f"let v{i}=0;" for i in range(80_000))
    start = time.monotonic()
    try:
        Engine(timeout_ms=None).compile(source)
        outcome = "compiled"
    except RhaiError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    took = time.monotonic() - start
    return {"input": "80,000 variables (1 MiB, default size limit), timeout_ms=None",
            "outcome": f"{outcome} after {took:.1f} s", "held": "compiling" in outcome and took < 6.5}


@fault("lone-surrogate")
def _surrogate(tmp: Path) -> Row:
    from lev_nb.scripting import compile_validator

    verdict = compile_validator(source='fn validate(c) { if c.contains("\ufffd") { "odd" } }').check("a\ud800b")
    return {"input": "a lone surrogate in text given to a validator", "outcome": repr(verdict),
            "held": "odd" in repr(verdict)}


# ------------------------------------------------------------------------------------------------
# Blueprints


@fault("gate-spin")
def _gate(tmp: Path) -> Row:
    import lev_nb

    bp = _blueprint("""
        [stages.work]
        available_tools = ["list_dir"]
        [stages.work.transitions.done]
        gate = { require_regions = ["conversation"], max_attempts = 1000000 }
        [stages.done]
        [stages.done.transitions]
    """)
    report = lev_nb.validate(bp)
    errors = [f for f in report.findings if f.severity == "error"] if report.error is None else []
    text = report.error or "; ".join(f.message for f in errors)
    return {"input": "gate max_attempts = 1000000", "outcome": _short(text or "valid"), "held": bool(text)}


@fault("gate-100-attempts-at-cap")
def _gate_hundred(tmp: Path) -> Row:
    run = _run(tmp, """
        [context.regions]
        system = { kind = "pinned", max_tokens = 2000 }
        notes = { kind = "pinned", max_tokens = 1000 }
        conversation = { kind = "sliding_window", max_items = 20, max_tokens = 8000 }
        [stages.work]
        available_tools = ["list_dir"]
        max_iterations = 1
        nudge = { enabled = false }
        [stages.work.transitions.done]
        gate = { require_regions = ["notes"], max_attempts = 100 }
        [stages.done]
        nudge = { enabled = false }
        [stages.done.transitions]
    """, [_call("list_dir", path="."), _say("r")])
    kinds = [e.kind for e in run.events.snapshot()]
    return {"input": "a gate with max_attempts = 100 re-asked at the stage's iteration cap",
            "outcome": f"{run.status}; {kinds.count('gate_blocked')} blocked, {kinds.count('gate_forced')} forced, "
            f"{kinds.count('stuck')} stuck", "held": run.status == "complete" and kinds.count("gate_forced") == 1}


@fault("deep-toml")
def _toml(tmp: Path) -> Row:
    import lev_nb
    from lev_nb.blueprint import BlueprintError

    text = '[agent]\nname = "x"\n[stages.a]\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n"
    try:
        lev_nb.load(text)
        return {"input": "a value nested 100,000 arrays deep", "outcome": "loaded", "held": False}
    except BlueprintError as exc:
        return {"input": "a value nested 100,000 arrays deep", "outcome": f"BlueprintError: {_short(exc, 70)}",
                "held": True}


@fault("deep-config-toml")
def _deep_config(tmp: Path) -> Row:
    (tmp / "home").mkdir()
    (tmp / "home" / "config.toml").write_text("[limits]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    proc = subprocess.run([sys.executable, "-m", "lev_nb.cli", "config", "show"], capture_output=True, text=True,
                          env=dict(os.environ, LEV_HOME=str(tmp / "home")), timeout=120)
    err = proc.stderr.strip()
    return {"input": "config.toml with a value nested 100,000 arrays deep", "outcome":
            f"exit {proc.returncode}: {_short(err.splitlines()[-1] if err else '', 90)}",
            "held": proc.returncode != 0 and "Traceback" not in err and len(err.splitlines()) <= 2}


# ------------------------------------------------------------------------------------------------
# The engine: callees that misbehave, and fairness


@fault("systemexit-provider")
def _systemexit(tmp: Path) -> Row:
    from lev_nb.providers import ScriptedModel

    class Exiting(ScriptedModel):
        async def complete(self, request: Any) -> Any:  # type: ignore[override]
            raise SystemExit(3)

    run = _run(tmp, QUICK, Exiting([_say("never")]))
    after = _run(tmp, QUICK, [_call("list_dir", path="."), _say("fine")])
    return {"input": "a provider raising SystemExit(3)", "outcome": f"{run.status}: {run.error}; next run {after.status}",
            "held": run.status == "error" and after.status == "complete"}


def _held_while(tmp: Path, start_a: Callable[[threading.Event, threading.Event], Any]) -> tuple[str, bool]:
    """Start run A (which blocks on ``entered``/``release``), finish a one-turn run B meanwhile."""
    entered, release = threading.Event(), threading.Event()
    run_a = start_a(entered, release)
    if not entered.wait(60):
        return "run A never reached the slow part", False
    start = time.monotonic()
    run_b = _run(tmp, QUICK, [_call("list_dir", path="."), _say("done")])
    took = time.monotonic() - start
    a_waiting = not run_a.done()
    release.set()
    run_a.wait(120)
    ok = run_b.status == "complete" and a_waiting and run_a.status == "complete"
    return f"run B {run_b.status} in {took * 1000:.0f} ms while A was held; A then {run_a.status}", ok


@fault("slow-validator")
def _slow_validator(tmp: Path) -> Row:
    from lev_nb.providers import ScriptedModel
    from lev_nb.scripting import Validator

    original = Validator.check

    def start_a(entered: threading.Event, release: threading.Event) -> Any:
        def slow(self: Validator, content: str) -> Any:
            entered.set()
            release.wait(120)
            return original(self, content)

        Validator.check = slow  # type: ignore[method-assign]
        bp = _blueprint('[stages.answer]\nmode = "output"\navailable_tools = ["submit_output"]\n'
                        'nudge = { enabled = false }\n[stages.answer.transitions]\n')
        model = ScriptedModel([_call("submit_output", content="slow"), _say("ok")])
        return bp.run("t", model=model, workdir=tmp / "a", home=tmp / "home", output_validator="fn validate(c) { () }")

    outcome, ok = _held_while(tmp, start_a)
    return {"input": "run A's output validator blocks; run B has one turn", "outcome": outcome, "held": ok}


@fault("blocking-tools")
def _blocking(tmp: Path) -> Row:
    from lev_nb.providers import ScriptedModel
    from lev_nb.tools import builtin

    original = builtin._read_one

    def start_a(entered: threading.Event, release: threading.Event) -> Any:
        def read_one(ctx: Any, path: str, cap: int) -> str:
            if path.startswith("held"):
                entered.set()
                release.wait(120)
            return original(ctx, path, cap)

        builtin._read_one = read_one  # type: ignore[assignment]
        many = {"tool_calls": [{"name": "read_file", "arguments": {"path": f"held-{i}"}} for i in range(40)]}
        bp = _blueprint(QUICK)
        return bp.run("t", model=ScriptedModel([many, _say("done")]), workdir=tmp / "a", home=tmp / "home")

    outcome, ok = _held_while(tmp, start_a)
    return {"input": "run A makes 40 blocking reads at once; run B calls list_dir", "outcome": outcome, "held": ok}


@fault("agent-tree-width")
def _tree_width(tmp: Path) -> Row:
    import lev_nb
    from lev_nb.messages import ModelResponse, ToolCall, ToolUseBlock

    home = tmp / "home"
    home.mkdir()
    (home / "config.toml").write_text("[limits]\nmax_agents_per_tree = 10\n")
    folder = tmp / "spawner"
    folder.mkdir()
    (folder / "agent.leviath").write_text('[agent]\nname = "spawner"\nmax_child_depth = 3\n'
                                          '[stages.go]\navailable_tools = ["spawn_agent"]\nnudge = { enabled = false }\n'
                                          'max_iterations = 3\n[stages.go.transitions]\n')

    class Spawner:
        name = "spawner"

        async def complete(self, request: Any) -> Any:
            done = any(isinstance(b, ToolUseBlock) for m in request.messages for b in m.blocks())
            if done:
                return ModelResponse(text="done")
            calls = [ToolCall(id=f"s{i}", name="spawn_agent", arguments={"blueprint": str(folder), "task": f"t{i}"})
                     for i in range(8)]  # 8 wide, 3 deep: 584 sub-agents without a cap
            return ModelResponse(tool_calls=calls)

    (tmp / "w").mkdir()
    run = lev_nb.run(folder, task="t", model=Spawner(), workdir=tmp / "w", home=home)
    run.wait(120)
    runs = len(list((home / "runs").iterdir()))
    return {"input": "each agent spawns 8 of itself, depth 3, max_agents_per_tree = 10",
            "outcome": f"{run.status}; {runs} runs in all", "held": runs <= 11}


@fault("secret-echo")
def _secret(tmp: Path) -> Row:
    from lev_nb.providers import ScriptedModel
    from lev_nb.providers.base import ProviderError

    key = "sk-ant-fault-0123456789abcdef"
    os.environ["ANTHROPIC_API_KEY"] = key

    class Echoing(ScriptedModel):
        async def complete(self, request: Any) -> Any:  # type: ignore[override]
            raise ProviderError("auth", f"HTTP 401: invalid x-api-key {key}")

    run = _run(tmp, QUICK, Echoing([]))
    folder = Path(run.run_dir)
    leaked = [p.name for p in folder.iterdir() if p.is_file() and key in p.read_text(errors="replace")]
    return {"input": "a 401 body quoting the API key", "outcome": f"{run.status}: …{(run.error or '')[-40:]}; "
            f"files holding the key: {leaked or 'none'}", "held": not leaked and key not in (run.error or "")}


@fault("taint-leak")
def _taint_leak(tmp: Path) -> Row:
    _allow_shell(tmp)
    rules = tmp / "home" / "rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "spin.rhai").write_text("loop {}")  # a hostile rule: it must allow nothing, and not stall the run
    body = "[security]\n" + SHELL_STAGE.replace('["shell", "list_dir"]', '["shell", "read_file"]')
    bp = _blueprint(body)
    work = Path(tempfile.mkdtemp(dir=tmp, prefix="work-"))
    (work / "notes.txt").write_text("launch date: March 3")
    from lev_nb.providers import ScriptedModel

    turns = [_call("read_file", path="notes.txt"), _call("shell", command="cat notes.txt > sent.txt"), _say("ok")]
    run = bp.run("the task", model=ScriptedModel(turns), workdir=work, home=tmp / "home", interactive=False)
    run.wait(120)
    codes = sorted({w.code for w in run.warnings})
    sent = (work / "sent.txt").exists()
    return {"input": "taint tracking on, a workdir file read, then a shell command carrying it out, "
                     "unattended, beside a looping policy rule",
            "outcome": f"{run.status}; sent: {sent}; warnings: {', '.join(codes)}",
            "held": run.status == "complete" and not sent and "taint-gate-denied" in codes
                    and "policy-rule-failed" in codes}


@fault("key-in-ordinary-variable")
def _ordinary_key(tmp: Path) -> Row:
    from lev_nb.providers import ScriptedModel
    from lev_nb.providers.base import ProviderError

    key = "sk-ordinary-fault-0123456789abcdef"
    os.environ["CLAUDE"] = key
    _allow_shell(tmp)
    with (tmp / "home" / "config.toml").open("a") as config:
        config.write('[model_providers.anthropic]\napi_key_env = "CLAUDE"\n')

    class Echoing(ScriptedModel):
        async def complete(self, request: Any) -> Any:  # type: ignore[override]
            if self.requests:  # the second call: the server quotes the key
                raise ProviderError("auth", f"HTTP 401: invalid x-api-key {key}")
            return await super().complete(request)

    run = _run(tmp, SHELL_STAGE, Echoing([_call("shell", command="env > env.txt; env")]))
    folder = Path(run.run_dir)
    leaked = [p.name for p in folder.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    seen = key in (Path(run.workdir) / "env.txt").read_text()
    return {"input": 'api_key_env = "CLAUDE"; the shell runs env, a 401 body quotes the key',
            "outcome": f"{run.status}; shell {'saw' if seen else 'did not see'} the key; "
            f"files holding it: {leaked or 'none'}", "held": not leaked and not seen and key not in (run.error or "")}


# ------------------------------------------------------------------------------------------------
# Script HTTP (what a Rhai provider script's http_get / http_post / stream_request reach)


def _serve_raw(answer: Callable[[Any], None], seen: list[bytes] | None = None) -> str:
    """A server on 127.0.0.1 answering each connection with ``answer(conn)`` (each request's bytes
    appended to ``seen``); its base URL."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            with conn:
                request = conn.recv(65536)
                if seen is not None:
                    seen.append(request)
                try:
                    answer(conn)
                except OSError:  # the client gave up
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}"


@fault("script-http-drip")
def _script_http_drip(tmp: Path) -> Row:
    from lev_nb.providers.script_http import ScriptHttpError, request

    def drip(conn: Any) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):  # one byte every 0.2 s: 20 s for the body
            conn.sendall(b"x")
            time.sleep(0.2)

    url = _serve_raw(drip)
    start = time.monotonic()
    try:
        outcome = f"answered {len(request('GET', url, timeout=2, allow_local=True))} bytes"
    except ScriptHttpError as exc:
        outcome = f"{exc.kind}: {exc.message}"
    took = time.monotonic() - start
    return {"input": "a server dripping a 100-byte body a byte every 0.2 s; timeout 2 s",
            "outcome": f"{outcome} after {took:.1f} s", "held": "within 2 s" in outcome and took < 4}


@fault("script-http-redirect-credentials")
def _script_http_redirect(tmp: Path) -> Row:
    from lev_nb.providers.script_http import request

    seen: list[bytes] = []
    target = _serve_raw(lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), seen)
    first = _serve_raw(lambda conn: conn.sendall(
        f"HTTP/1.1 302 Found\r\nLocation: {target}/landing\r\nContent-Length: 0\r\n\r\n".encode()))
    body = request("GET", first, allow_local=True,
                   headers={"Authorization": "Bearer sk-fault-0123456789", "x-api-key": "sk-fault-0123456789"})
    leaked = b"sk-fault" in b"".join(seen)
    return {"input": "a 302 to another port, the call carrying Authorization and x-api-key",
            "outcome": f"answered '{body}'; the other origin {'received' if leaked else 'did not receive'} "
            "the credentials", "held": bool(seen) and not leaked}


@fault("inbox-hostile-entries")
def _inbox(tmp: Path) -> Row:
    from lev_nb.providers import ScriptedModel
    from lev_nb.store import RunStore

    bp = _blueprint('[stages.work]\navailable_tools = ["ask_user_text"]\nallow_blocking_tools = true\n'
                    'nudge = { enabled = false }\n[stages.work.transitions]\n')
    (tmp / "w").mkdir()
    run = bp.run("t", model=ScriptedModel([_call("ask_user_text", prompt="Name?"), _say("ok")]), workdir=tmp / "w",
                 home=tmp / "home", interactive=True)
    deadline = time.monotonic() + 60
    while not run.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    inbox = Path(run.run_dir) / "inbox"
    inbox.mkdir(exist_ok=True)
    (inbox / ".deep").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (inbox / ".deep").rename(inbox / "00000000000000000001-deep.json")
    (inbox / "00000000000000000002-x.json").mkdir()
    time.sleep(2)  # four polls of the waiting run: each bad entry must be reported once, not four times
    RunStore(run.run_id, home=tmp / "home").post_inbox(
        {"type": "response", "request_id": run.pending[0].id if run.pending else "", "answer": "Ada"})
    run.wait(60)
    warnings = [e.message for e in run.events.snapshot() if e.kind == "warning" and "inbox" in e.message]
    aside = sorted(p.name.split("-", 1)[1] for p in inbox.iterdir())
    return {"input": "a 100,000-deep JSON file and a directory named x.json in inbox/ of a waiting run",
            "outcome": f"{run.status}; {len(warnings)} warnings; set aside: {aside}",
            "held": run.status == "complete" and len(warnings) == 2 and len(aside) == 2}


# ------------------------------------------------------------------------------------------------
# Files, the shell and the sandbox


@fault("fifo-read")
def _fifo(tmp: Path) -> Row:
    bp = _blueprint(QUICK)
    work = tmp / "w"
    work.mkdir()
    os.mkfifo(work / "pipe")
    from lev_nb.providers import ScriptedModel

    model = ScriptedModel([_call("read_file", path="pipe"), _say("done")])
    run = bp.run("t", model=model, workdir=work, home=tmp / "home")
    run.wait(60)
    result = next((e for e in run.events.snapshot() if e.kind == "tool_finished"), None)
    return {"input": "read_file on a FIFO", "outcome": f"{run.status}; {_short(getattr(result, 'summary', ''), 70)}",
            "held": run.status == "complete"}


@fault("hard-link")
def _hardlink(tmp: Path) -> Row:
    outside = tmp / "outside.txt"
    outside.write_text("original")
    work = tmp / "w"
    work.mkdir()
    os.link(outside, work / "linked.txt")
    from lev_nb.providers import ScriptedModel

    bp = _blueprint(QUICK)
    model = ScriptedModel([_call("write_file", path="linked.txt", content="changed"), _say("done")])
    run = bp.run("t", model=model, workdir=work, home=tmp / "home")
    run.wait(60)
    return {"input": "write_file through a hard link to a file outside the workdir",
            "outcome": f"{run.status}; outside file still '{outside.read_text()}'",
            "held": outside.read_text() == "original"}


@fault("script-shell-background-child")
def _script_shell_background(tmp: Path) -> Row:
    from lev_nb.tools.scripts import RunToolHost
    from lev_nb.workspace import Workspace

    start = time.monotonic()
    try:
        out = RunToolHost(Workspace(tmp), shell_allowed=True).shell("sleep 300 & echo started")
    except TimeoutError as exc:
        out = f"TimeoutError: {exc}"
    took = time.monotonic() - start
    return {"input": "a script's shell('sleep 300 & echo started')", "outcome": f"{_short(out, 60)} after {took:.1f} s",
            "held": out.strip() == "started" and took < 5}


@fault("sandbox-read-outside")
def _sandbox(tmp: Path) -> Row:
    from lev_nb.sandbox import SandboxSpec, choose

    if choose(SandboxSpec(kind="namespace")).program is None:
        return {"input": "[sandbox] namespace: cat a file outside the workdir", "outcome": "skipped: no bubblewrap",
                "held": None}
    _allow_shell(tmp)
    secret = tmp / "secret.txt"
    secret.write_text("swordfish")
    os.environ["ANTHROPIC_API_KEY"] = "sk-ant-fault-0123456789abcdef"
    run = _run(tmp, '[sandbox]\nkind = "namespace"\nnetwork = false\n' + SHELL_STAGE,
               [_call("shell", command=f"cat {secret} > seen.txt 2>&1; env >> seen.txt; echo ok > mine.txt"),
                _say("done")])
    seen = (Path(run.workdir) / "seen.txt").read_text()
    wrote = (Path(run.workdir) / "mine.txt").exists()
    ok = "swordfish" not in seen and "sk-ant" not in seen and wrote
    return {"input": "[sandbox] namespace: cat a file outside the workdir, env", "outcome":
            f"{run.status}; outside file {'read' if 'swordfish' in seen else 'not found'}, key "
            f"{'seen' if 'sk-ant' in seen else 'absent'}, workdir {'writable' if wrote else 'read-only'}", "held": ok}


@fault("sandbox-mount-lev-home")
def _sandbox_mount(tmp: Path) -> Row:
    from lev_nb.engine.launch import LaunchError

    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text(ALLOW_SHELL + 'sandbox_mounts = ["/:rw"]\n')  # a user who grants everything
    what = f'[sandbox] mount = ["/:/host:ro", "LEV_HOME:/x:rw"], then append to /x/config.toml'
    body = f'[sandbox]\nkind = "namespace"\nmount = ["/:/host:ro", "{home}:/x:rw"]\n' + SHELL_STAGE
    try:
        run = _run(tmp, body, [_call("shell", command="echo pwned >> /x/config.toml"), _say("done")])
    except LaunchError as exc:
        return {"input": what, "outcome": f"LaunchError: {_short(exc, 90)}", "held": "pwned" not in config.read_text()}
    return {"input": what, "outcome": f"the run started ({run.status})", "held": False}


@fault("sandbox-required-missing")
def _sandbox_missing(tmp: Path) -> Row:
    from lev_nb.engine.launch import LaunchError

    os.environ["PATH"] = str(tmp)  # no bubblewrap, no container runtime
    try:
        _run(tmp, '[sandbox]\nkind = "namespace"\non_unavailable = "error"\n' + SHELL_STAGE, [_say("x")])
        return {"input": "[sandbox] required, no bwrap on PATH", "outcome": "the run started", "held": False}
    except LaunchError as exc:
        return {"input": "[sandbox] required, no bwrap on PATH", "outcome": f"LaunchError: {_short(exc, 80)}",
                "held": True}


@fault("forged-record")
def _forged(tmp: Path) -> Row:
    _allow_shell(tmp)
    forged = '{"type": "completed", "status": "complete", "note": "forged"}'
    # A program, not a redirect: a redirect outside the workdir is refused before it runs.
    command = (f"d=$(ls -td {tmp}/home/runs/*/ | head -1); "
               f"echo '{forged}' | dd of=\"$d/events.jsonl\" oflag=append conv=notrunc")
    run = _run(tmp, SHELL_STAGE, [_call("shell", command=command), _say("done"), _say("done")])
    lines = (Path(run.run_dir) / "events.jsonl").read_text().splitlines()
    kept = any('"forged"' in line and line.startswith('{"type": "completed"') for line in lines)
    return {"input": "the agent's shell appends a line to its own events.jsonl (no sandbox)",
            "outcome": f"{run.status}: {run.error}; forged line {'kept' if kept else 'cut'}",
            "held": run.status == "error" and not kept}


@fault("sigkill-then-resume")
def _sigkill_resume(tmp: Path) -> Row:
    import signal

    agent = tmp / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "ledger"\n' + SHELL_STAGE)
    _allow_shell(tmp)
    work = tmp / "work"
    work.mkdir()
    script = tmp / "turns.json"
    script.write_text(json.dumps([
        _call("shell", command="echo one >> ledger"),
        _call("shell", command="echo two-start >> ledger; touch started; sleep 3; echo two-end >> ledger"),
        _call("shell", command="echo three >> ledger"), _say("done")]))
    env = dict(os.environ, LEV_HOME=str(tmp / "home"))
    run = [sys.executable, "-m", "lev_nb.cli"]
    proc = subprocess.Popen([*run, "run", str(agent), "--task", "t", "--model", f"scripted:{script}", "--workdir",
                             str(work), "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (work / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    time.sleep(4)  # past the command's own end: a command that outlived the run would have appended by now
    (folder,) = (tmp / "home" / "runs").iterdir()
    resumed = subprocess.run([*run, "resume", folder.name, "--quiet"], env=env, capture_output=True, text=True,
                             timeout=120)
    ledger = (work / "ledger").read_text().split()
    return {"input": "SIGKILL of lev run during a 3 s shell call, then lev resume (same scripted model)",
            "outcome": f"resume exit {resumed.returncode}; ledger {ledger}",
            "held": resumed.returncode == 0 and ledger == ["one", "two-start", "three"]}


@fault("ctrl-c-then-resume")
def _ctrl_c_resume(tmp: Path) -> Row:
    import signal

    agent = tmp / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "ledger"\n' + SHELL_STAGE)
    _allow_shell(tmp)
    work = tmp / "work"
    work.mkdir()
    script = tmp / "turns.json"
    script.write_text(json.dumps([_call("shell", command="echo one >> ledger; touch started; sleep 300"),
                                  _call("shell", command="echo two >> ledger"), _say("done")]))
    env = dict(os.environ, LEV_HOME=str(tmp / "home"))
    run = [sys.executable, "-m", "lev_nb.cli"]
    proc = subprocess.Popen([*run, "run", str(agent), "--task", "t", "--model", f"scripted:{script}", "--workdir",
                             str(work), "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (work / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    (folder,) = (tmp / "home" / "runs").iterdir()
    status = json.loads((folder / "meta.json").read_text())["status"]
    resumed = subprocess.run([*run, "resume", folder.name, "--quiet"], env=env, capture_output=True, text=True,
                             timeout=120)
    ledger = (work / "ledger").read_text().split()
    return {"input": "Ctrl-C on lev run during a shell call, then lev resume",
            "outcome": f"exit {proc.returncode}, record {status}; resume exit {resumed.returncode}; ledger {ledger}",
            "held": proc.returncode == 130 and status == "paused" and resumed.returncode == 0
            and ledger == ["one", "two"]}


# ------------------------------------------------------------------------------------------------
# The disk and the webhook


@fault("full-disk")
def _full_disk(tmp: Path) -> Row:
    # A real limit in a child `lev run`: RLIMIT_FSIZE makes writes past 64 KiB fail (EFBIG), as a
    # full disk fails them with ENOSPC; the record's .jsonl files outgrow it, meta.json does not.
    agent = tmp / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "big"\n' + QUICK)
    turns = [{"text": "x" * 4000, "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}] * 40
    script = tmp / "turns.json"
    script.write_text(json.dumps(turns + [{"text": "done"}]))
    (tmp / "work").mkdir()
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536)); from lev_nb.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "run", str(agent), "--task", "t", "--model", f"scripted:{script}",
                           "--workdir", str(tmp / "work"), "--quiet"],
                          capture_output=True, text=True, env=dict(os.environ, LEV_HOME=str(tmp / "home")), timeout=120)
    (folder,) = (tmp / "home" / "runs").iterdir()
    meta = json.loads((folder / "meta.json").read_text())
    whole = all(line.strip() and json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines())
    return {"input": "files limited to 64 KiB mid-run (EFBIG, as ENOSPC)", "outcome":
            f"exit {proc.returncode}, meta {meta['status']}: {meta.get('error')}; events whole: {whole}",
            "held": proc.returncode == 1 and meta["status"] == "error" and whole}


@fault("unwritable-home")
def _home(tmp: Path) -> Row:
    agent = tmp / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "disk"\n' + QUICK)
    (tmp / "home").mkdir()
    (tmp / "home" / "runs").write_text("a file where the runs folder should be")
    proc = subprocess.run([sys.executable, "-m", "lev_nb.cli", "run", str(agent), "--task", "t", "--model", "mock", "--quiet"],
                          capture_output=True, text=True, env=dict(os.environ, LEV_HOME=str(tmp / "home")), timeout=120)
    err = proc.stderr.strip().replace(str(tmp), "TMP")
    return {"input": "LEV_HOME/runs cannot be created", "outcome": f"exit {proc.returncode}: {err}",
            "held": proc.returncode == 1 and "Traceback" not in proc.stderr and len(err.splitlines()) == 1}


@fault("trickling-webhook")
def _webhook(tmp: Path) -> Row:
    import socket

    # One attempt with a 2 s deadline, for the table ([webhook] of config.toml: 10 s and 3 retries by default).
    (tmp / "home").mkdir(exist_ok=True)
    (tmp / "home" / "config.toml").write_text("[webhook]\ntimeout_secs = 2\nmax_retries = 0\n")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":  # the answer, a byte at a time
            if stop.is_set():
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return
            stop.wait(0.5)

    threading.Thread(target=trickle, daemon=True).start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    start = time.monotonic()
    run = _run(tmp, QUICK, [_say("done")], webhook=url)
    took = time.monotonic() - start
    stop.set()
    failure = (run.webhook_error or "delivered").replace(url, "http://127.0.0.1:PORT/hook")
    return {"input": "a receiver answering one byte every 0.5 s (total deadline 2 s)",
            "outcome": f"run {run.status}, wait returned after {took:.1f} s; {_short(failure, 70)}",
            "held": took < 6 and run.webhook_error is not None}


# ------------------------------------------------------------------------------------------------


def one(name: str) -> Row:
    """Run fault ``name`` in this process (a child of :func:`main`)."""
    global _SCRATCH
    with tempfile.TemporaryDirectory(prefix="lev-fault-") as folder:
        tmp = _SCRATCH = Path(folder)
        os.environ["LEV_HOME"] = str(tmp / "home")
        row = FAULTS[name](tmp)
    return {k: _placeholders(v) if isinstance(v, str) else v for k, v in row.items()}


def _verdict(held: bool | None, yes: str, no: str) -> str:
    return "skipped" if held is None else yes if held else no


def _tally(rows: list[Row]) -> str:
    """"12/14 held, 1 skipped": a fault that could not be tried is not counted as held."""
    held = sum(r["held"] is True for r in rows)
    skipped = sum(r["held"] is None for r in rows)
    return f"{held}/{len(rows) - skipped} held" + (f", {skipped} skipped" if skipped else "")


def main() -> None:
    """Run every fault in its own child, print the table, save the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", help="run one fault in this process and print its row as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the saved results as a Markdown table")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    if args.markdown:
        saved = json.loads(RESULTS.read_text())
        print("| fault | input | outcome | held |\n|---|---|---|---|")
        for row in saved["faults"]:
            cells = [row["fault"], row["input"], _short(row["outcome"], 150), _verdict(row["held"], "yes", "**no**")]
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        print(f"\n{_tally(saved['faults'])} ({saved['machine']['cpus']} CPUs, Python {saved['machine']['python']})")
        return
    rows = []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("ANTHROPIC_API_KEY", None)
    for name in FAULTS:
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True,
                                  env=env, timeout=CHILD_TIMEOUT_S, cwd=ROOT)
            took = time.monotonic() - start
            if proc.returncode == 0:
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            else:
                row = {"input": "", "outcome": f"the process died (status {proc.returncode}): "
                       f"{_short(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else '')}", "held": False}
        except subprocess.TimeoutExpired:
            took = time.monotonic() - start
            row = {"input": "", "outcome": f"no answer within {CHILD_TIMEOUT_S} s (stalled)", "held": False}
        row = {"fault": name, **row, "seconds": round(took, 2)}
        rows.append(row)
        print(f"{name:34} {_verdict(row['held'], 'held', 'BROKE'):7} {row['seconds']:6.1f}s  {_short(row['outcome'], 90)}",
              flush=True)
    print(f"\n{_tally(rows)}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()},
        "held": sum(r["held"] is True for r in rows),
        "skipped": sum(r["held"] is None for r in rows),
        "faults": rows,
    }, indent=2, ensure_ascii=False) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

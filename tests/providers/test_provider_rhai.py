"""Model providers written in Rhai (spec/rhai.md §2.5, §3.5): loading and entry-point checks, the
host functions, a chat-completions style server on 127.0.0.1 driving whole runs (plain and
streamed answers, tool calls, errors the script throws), and the address policy every script HTTP
call obeys (resolved addresses and redirect hops; loopback only when the configuration allows it)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lev_nb.messages import Message, ModelRequest, ToolSpec
from lev_nb.providers import ProviderError
from lev_nb.providers import script_http
from lev_nb.providers.rhai_provider import (
    RhaiProvider,
    find_script,
    load_provider_script,
    map_script_error,
    parse_meta,
)
from lev_nb.providers.resolve import is_registered, provider_for
from lev_nb.rhai import Engine, RhaiError

# A provider for an OpenAI-style chat-completions API, in the style of the upstream examples.
CHATTY = r'''
// @provider chatty
// @description A chat-completions server for the tests
// @supports_streaming true
// @default_model chat-small
// @max_context_tokens 32768
// @max_output_tokens 2048

fn initialize(config) {
    let key = config.api_key ?? env_var("CHATTY_TOKEN");
    if key == () { throw #{ message: "CHATTY_TOKEN is not set", transient: false }; }
    #{ base_url: config.base_url ?? "https://chat.example/v1", key: key, style: config.style ?? "plain" }
}

fn headers(state) { #{ "Authorization": `Bearer ${state.key}`, "Content-Type": "application/json" } }

fn body(state, request, streaming) {
    let messages = [];
    if request.system.len() > 0 {
        messages.push(#{ role: "system", content: request.system.map(|b| b.text).reduce(|a, b| if a == "" { b } else { a + "\n\n" + b }, "") });
    }
    for m in request.messages {
        if type_of(m.content) == "string" {
            messages.push(#{ role: m.role, content: m.content });
        } else {
            let text = "";
            for b in m.content {
                if b.type == "text" { text += b.text; }
                if b.type == "tool_result" { messages.push(#{ role: "tool", tool_call_id: b.tool_use_id, content: b.content }); }
            }
            let calls = m.content.filter(|b| b.type == "tool_use").map(|b| #{
                id: b.id, type: "function", function: #{ name: b.name, arguments: to_json(b.input) } });
            if calls.len() > 0 { messages.push(#{ role: "assistant", content: text, tool_calls: calls }); }
            else if text != "" { messages.push(#{ role: m.role, content: text }); }
        }
    }
    let out = #{ model: request.model, messages: messages, max_tokens: request.max_tokens };
    if request.tools.len() > 0 {
        out.tools = request.tools.map(|t| #{ type: "function", function: #{ name: t.name, description: t.description, parameters: t.parameters } });
    }
    if streaming { out.stream = true; }
    to_json(out)
}

fn finish(reason) {
    switch reason { "tool_calls" => "ToolCall", "length" => "TokenLimit", _ => "Complete" }
}

fn usage(u) {
    if u == () { return #{}; }
    #{ prompt_tokens: u.prompt_tokens ?? 0, completion_tokens: u.completion_tokens ?? 0, total_tokens: u.total_tokens ?? 0 }
}

fn inference(state, request) {
    let reply = parse_json(http_post(`${state.base_url}/chat/completions`, body(state, request, false), headers(state)));
    let choice = reply.choices[0];
    let calls = if choice.message.tool_calls != () {
        choice.message.tool_calls.map(|c| #{ id: c.id, name: c.function.name, arguments: parse_json(c.function.arguments) })
    } else { [] };
    #{ content: choice.message.content ?? "", tool_calls: calls, tokens_used: usage(reply.usage),
       finish_reason: finish(choice.finish_reason) }
}

fn stream(state, request, on_chunk) {
    if state.style != "stream" { return on_chunk.call(inference_chunk(state, request)); }
    stream_request(`${state.base_url}/chat/completions`, body(state, request, true), headers(state), |payload| {
        let data = parse_sse(payload);
        if data == () { return; }
        let choice = data.choices[0];
        let chunk = #{ delta: choice.delta.content ?? "" };
        if choice.delta.tool_calls != () {
            chunk.tool_calls = choice.delta.tool_calls.map(|c| #{ index: c.index, id: c.id, name: c.function.name,
                                                               arguments_delta: c.function.arguments ?? "" });
        }
        if choice.finish_reason != () { chunk.finish_reason = finish(choice.finish_reason); }
        if data.usage != () { chunk.tokens = usage(data.usage); }
        on_chunk.call(chunk);
    });
}

fn inference_chunk(state, request) {
    let r = inference(state, request);
    #{ delta: r.content, tool_calls: (r.tool_calls ?? []).map(|c| #{ index: 0, id: c.id, name: c.name, arguments_delta: to_json(c.arguments) }),
       tokens: r.tokens_used, finish_reason: r.finish_reason }
}

fn count_tokens(state, text, model) { count_tokens_heuristic(text, "anthropic") }

fn list_models(state) {
    parse_json(http_get(`${state.base_url}/models`, headers(state))).data.map(|m| #{ id: m.id, max_context_tokens: m.window })
}
'''


# --------------------------------------------------------------------------------- chat server
class ChatServer:
    """An OpenAI-style chat-completions server: ``replies`` queued per request (a dict answer, a
    list of SSE payloads, or an (status, body) error), recording every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: list[Any] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        chat = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, body: bytes, content_type: str = "application/json",
                      extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                chat.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers)})
                if self.path.startswith("/redirect"):
                    self._send(302, b"", extra={"location": self.path.split("to=", 1)[1]})
                    return
                self._send(200, json.dumps({"data": [{"id": "chat-small", "window": 32768}, {"name": "no id"}]}).encode())

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw)
                chat.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers), "body": body})
                reply = chat.replies.pop(0) if chat.replies else {"content": "default answer"}
                if isinstance(reply, tuple):
                    status, payload = reply
                    self._send(status, json.dumps(payload).encode())
                elif isinstance(reply, list):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for item in reply:
                        if item == "CUT":
                            self.wfile.flush()
                            self.close_connection = True
                            self.connection.shutdown(2)
                            return
                        data = item if isinstance(item, str) else json.dumps(item)
                        chunk = f"data: {data}\n\n".encode()
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
                    if reply.get("tool_calls"):
                        message["tool_calls"] = reply["tool_calls"]
                    answer = {"choices": [{"message": message, "finish_reason": reply.get("finish", "stop")}],
                              "usage": {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}}
                    self._send(200, json.dumps(answer).encode())

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    try:
        yield server
    finally:
        server.close()


def configure(home: Path, chat: ChatServer | None, *, style: str = "plain", local: bool = True,
              extra: str = "", script: str = CHATTY) -> Path:
    """Install the chatty provider in ``home`` and write its configuration."""
    (home / "providers").mkdir(parents=True, exist_ok=True)
    path = home / "providers" / "chatty.rhai"
    path.write_text(script, encoding="utf-8")
    lines = ["[security]", f"allow_local_network = {str(local).lower()}", 'allow_env_vars = ["chatty_token"]',
             "allow_blueprint_permissions = true", "[model_providers.chatty]"]
    if chat is not None:
        lines.append(f'base_url = "{chat.url}"')
    lines += [f'options = {{ style = "{style}" }}', extra]
    (home / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATTY_TOKEN", "tok-123")


def ask(provider: RhaiProvider, request: ModelRequest | None = None) -> Any:
    return asyncio.run(provider.complete(request or ModelRequest(provider="chatty", model="chat-small",
                                                                 messages=[Message("user", "hi")])))


# ----------------------------------------------------------------------------------- loading
def test_the_script_is_found_by_name_and_its_metadata_read(home: Path, token: None) -> None:
    from lev_nb.settings import current

    path = configure(home, None)
    assert find_script("chatty", current()) == path
    assert is_registered("chatty") and not is_registered("nobody")
    assert isinstance(provider_for("chatty", "chat-small"), RhaiProvider)
    meta = parse_meta(CHATTY)
    assert (meta.provider, meta.default_model, meta.max_context_tokens, meta.max_output_tokens, meta.supports_streaming) == (
        "chatty", "chat-small", 32768, 2048, True)
    assert parse_meta("// @max_context_tokens lots\n").max_context_tokens == 8192  # unparsable: ignored
    script = load_provider_script("chatty", path, current())
    assert script.has == {"stream": True, "count_tokens": True, "list_models": True}
    assert script.state["key"] == "tok-123" and script.state["style"] == "plain"


def test_a_configured_script_path_and_the_window_it_declares(home: Path, token: None) -> None:
    from lev_nb.engine.plan.build import plan_from_blueprint
    from support import blueprint

    (home / "elsewhere").mkdir(parents=True)
    (home / "elsewhere" / "gw.rhai").write_text(CHATTY, encoding="utf-8")
    (home / "config.toml").write_text(f'[model_providers.gateway]\nscript = "{home / "elsewhere" / "gw"}"\n')
    assert is_registered("gateway")
    plan = plan_from_blueprint(blueprint('[stages.s]\nmodel = { provider = "gateway", model = "m" }\n'))
    assert plan.window_tokens == 32768


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("fn inference(state, request) { #{} }", "script must define fn initialize(config)"),
        ("fn initialize(config) { #{} }", "script must define fn inference(state, request)"),
        ("fn initialize(config) { #{} }\nfn inference(state) { #{} }", "fn inference must take 2 parameters"),
        ("fn initialize(config) { throw \"no key\"; }\nfn inference(s, r) { #{} }", "initialize failed: no key"),
        ("fn initialize(config) { http_get(\"https://x.example\") }\nfn inference(s, r) { #{} }",
         "not available in initialize()"),
        ("fn initialize(config) {", "does not compile"),
    ],
    ids=["no-initialize", "no-inference", "wrong-arity", "initialize-throws", "no-http-offline", "syntax"],
)
def test_a_broken_script_is_refused_with_a_clear_message(home: Path, source: str, message: str) -> None:
    from lev_nb.providers.rhai_provider import ProviderScriptError
    from lev_nb.settings import current

    path = configure(home, None, script=source)
    with pytest.raises(ProviderScriptError) as info:
        load_provider_script("chatty", path, current())
    assert message in str(info.value) and str(path) in str(info.value)
    error = pytest.raises(ProviderError, ask, RhaiProvider("chatty", "m")).value
    assert error.kind == "unknown_model"  # unusable: a stage falls back to its next model


def test_optional_entry_points_count_only_at_their_exact_arity(home: Path) -> None:
    from lev_nb.settings import current

    source = "fn initialize(c) { #{} }\nfn inference(s, r) { #{} }\nfn stream(s, r) { }\nfn list_models() { [] }\n"
    script = load_provider_script("chatty", configure(home, None, script=source), current())
    assert script.has == {"stream": False, "count_tokens": False, "list_models": False}


def test_a_changed_script_is_reloaded(home: Path, chat: ChatServer, token: None) -> None:
    from lev_nb.settings import current

    path = configure(home, chat)
    first = load_provider_script("chatty", path, current())
    assert load_provider_script("chatty", path, current()) is first
    path.write_text(CHATTY.replace('"plain"', '"changed"'), encoding="utf-8")
    os.utime(path, (time.time() + 5, time.time() + 5))
    configure_text = (home / "config.toml").read_text().replace('options = { style = "plain" }', "")
    (home / "config.toml").write_text(configure_text)
    assert load_provider_script("chatty", path, current()).state["style"] == "changed"


# ------------------------------------------------------------------------------ host functions
def test_the_provider_host_functions(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb.providers.rhai_provider import _CallContext
    from lev_nb.settings import current

    configure(home, None)
    monkeypatch.setenv("PLAIN_SETTING", "value")
    monkeypatch.setenv("OTHER_API_KEY", "secret")
    monkeypatch.setenv("CHATTY_TOKEN", "allowed")
    context = _CallContext(current(), timeout_s=5, loop=None)
    engine = context.engine()
    assert engine.eval('encode_uri("a b&c-_.~")') == "a%20b%26c-_.~"
    assert engine.eval('encode_uri("€")') == "%E2%82%AC"
    assert engine.eval('encode_base64("hi")') == "aGk="
    assert engine.eval('parse_sse("data: {\\"a\\": [1]}")') == {"a": [1]}
    assert engine.eval('parse_sse("  data: [DONE] ")') is None
    assert engine.eval('parse_sse("not json")') is None and engine.eval('parse_sse("")') is None
    assert engine.eval('count_tokens_heuristic("1234567", "anthropic")') == 2
    assert engine.eval('count_tokens_heuristic("12345", "gemini")') == 2
    assert engine.eval('env_var("PLAIN_SETTING")') == "value"
    assert engine.eval('env_var("OTHER_API_KEY")') is None  # credential-shaped: () without a grant
    assert engine.eval('env_var("CHATTY_TOKEN")') == "allowed"  # listed (in any case) in allow_env_vars
    assert engine.eval('env_var("NOT_SET_AT_ALL_X")') is None
    assert any("OTHER_API_KEY" in w for w in context.warnings)
    assert engine.eval('to_json(#{a: [1, "é"]})') == '{"a":[1,"é"]}'


def test_what_a_script_throws_becomes_a_provider_error() -> None:
    engine = Engine()

    def thrown(expr: str) -> ProviderError:
        with pytest.raises(RhaiError) as info:
            engine.eval(f"throw {expr};")
        return map_script_error(info.value, "x.rhai")

    assert (thrown('#{kind: "rate_limited", retry_after: 3}').kind, thrown('#{kind: "rate_limited", retry_after: 3}').retry_after) == ("rate_limited", 3.0)
    assert thrown('#{kind: "transport", message: "reset"}').kind == "transport"
    assert thrown('#{kind: "server", message: "HTTP 503"}').transient
    assert thrown('#{kind: "api", message: "HTTP 402: pay"}').kind == "credits"
    assert thrown('#{kind: "api", message: "HTTP 401: who are you"}').kind == "auth"
    assert thrown('#{kind: "api", message: "HTTP 404: model chat-x not found"}').kind == "unknown_model"
    assert thrown('#{kind: "api", message: "HTTP 400: bad"}').kind == "api"
    assert thrown('#{kind: "invalid_response", message: "x"}').kind == "invalid_response"
    assert thrown('#{transient: true, message: "flaky"}').kind == "transport"
    other = thrown('#{}')
    assert (other.kind, other.message) == ("api", "provider script error")
    assert "boom" in thrown('"boom"').message


# ----------------------------------------------------------------------------- on the wire
def test_inference_answers_through_the_script(home: Path, chat: ChatServer, token: None) -> None:
    configure(home, chat)
    chat.replies.append({"content": "hello there"})
    pieces: list[str] = []
    request = ModelRequest(provider="chatty", model="chat-small", system=["Be kind."], messages=[Message("user", "hi")],
                           tools=[ToolSpec("list_dir", "List a folder.")])
    request.on_text = pieces.append
    response = ask(RhaiProvider("chatty", "chat-small"), request)
    assert (response.text, response.finish_reason) == ("hello there", "complete")
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (40, 6)
    assert pieces == ["hello there"]  # a script that does not stream still reports its text, once
    sent = chat.requests[0]
    assert sent["headers"]["Authorization"] == "Bearer tok-123"
    assert sent["body"]["messages"] == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]
    assert sent["body"]["tools"][0]["function"]["name"] == "list_dir"


def test_streamed_answers_and_tool_calls_assemble_from_chunks(home: Path, chat: ChatServer, token: None) -> None:
    configure(home, chat, style="stream")
    chat.replies.append([
        {"choices": [{"delta": {"content": "Let me "}, "finish_reason": None}]},
        {"choices": [{"delta": {"content": "look."}, "finish_reason": None}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "list_dir", "arguments": "{\"pa"}}]},
                      "finish_reason": None}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\": \".\"}"}}]},
                      "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
        "[DONE]",
        {"choices": [{"delta": {"content": "never read"}}]},
    ])
    pieces: list[str] = []
    request = ModelRequest(provider="chatty", model="chat-small", messages=[Message("user", "hi")])
    request.on_text = pieces.append
    response = ask(RhaiProvider("chatty", "chat-small"), request)
    assert pieces == ["Let me ", "look."] and response.text == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [("c1", "list_dir", {"path": "."})]
    assert response.finish_reason == "tool_use" and response.usage.completion_tokens == 4
    assert chat.requests[0]["body"]["stream"] is True


def test_http_failures_reach_the_script_as_maps_it_can_catch(home: Path, chat: ChatServer, token: None) -> None:
    catching = CHATTY.replace('fn inference(state, request) {', '''fn inference(state, request) {
    try { http_post(`${state.base_url}/chat/completions`, "{}", headers(state)); }
    catch (e) { if e.kind == "api" && e.message.starts_with("HTTP 418") { return #{ content: "caught " + e.kind }; } throw e; }''')
    configure(home, chat, script=catching)
    chat.replies.append((418, {"error": "teapot"}))
    assert ask(RhaiProvider("chatty", "m")).text == "caught api"
    chat.replies.append((402, {"error": {"message": "insufficient credits"}}))
    error = pytest.raises(ProviderError, ask, RhaiProvider("chatty", "m")).value
    assert error.kind == "credits" and "HTTP 402" in error.message
    chat.replies.append((429, {"error": "slow"}))
    assert pytest.raises(ProviderError, ask, RhaiProvider("chatty", "m")).value.kind == "rate_limited"


def test_count_tokens_and_list_models(home: Path, chat: ChatServer, token: None) -> None:
    configure(home, chat)
    provider = RhaiProvider("chatty", "chat-small")
    assert asyncio.run(provider.count_tokens("1234567")) == 2
    assert asyncio.run(provider.list_models()) == [
        {"id": "chat-small", "display_name": "chat-small", "max_context_tokens": 32768, "max_output_tokens": 4096}]


# ------------------------------------------------------------------------------ a whole run
RUN = """
[agent]
name = "rhai-run"
[tool_permissions]
list_dir = "allow"
[stages.work]
model = { provider = "chatty", model = "chat-small" }
available_tools = ["list_dir"]
[stages.work.transitions]
"""


def test_a_rhai_provider_drives_a_whole_run(home: Path, chat: ChatServer, token: None, tmp_path: Path) -> None:
    from lev_nb import load

    configure(home, chat, style="stream")
    chat.replies += [
        [{"choices": [{"delta": {"content": "Looking."}, "finish_reason": None}]},
         {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "list_dir",
                                                                                       "arguments": "{\"path\": \".\"}"}}]},
                       "finish_reason": "tool_calls"}]}],
        [{"choices": [{"delta": {"content": "All "}, "finish_reason": None}]},
         {"choices": [{"delta": {"content": "done."}, "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 30, "completion_tokens": 3}}],
    ]
    workdir = tmp_path / "w"
    workdir.mkdir()
    run = load(RUN).run("look around", home=home, workdir=workdir)
    run.wait(60)
    assert run.status == "complete", run.error
    events = run.events.snapshot()
    assert [e.tool for e in events if e.kind == "tool_finished"] == ["list_dir"]
    assert "".join(e.text for e in events if e.kind == "model_text") == "Looking.All done."
    second = chat.requests[1]["body"]["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {"name": "list_dir", "arguments": '{"path":"."}'}
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "c1"
    calls = [e for e in events if e.kind == "model_call"]
    assert [(c.provider, c.model) for c in calls] == [("chatty", "chat-small")] * 2
    assert run.meta["usage"]["total"]["completion_tokens"] == 3
    assert run.meta["cost_usd"] is None  # no price for a script provider unless configured


def test_a_cut_event_stream_is_retried(home: Path, chat: ChatServer, token: None, tmp_path: Path) -> None:
    from lev_nb import load
    from lev_nb.engine.pipeline.inference import RetryPolicy

    configure(home, chat, style="stream")
    chat.replies += [
        [{"choices": [{"delta": {"content": "Partial"}, "finish_reason": None}]}, "CUT"],
        [{"choices": [{"delta": {"content": "Whole answer."}, "finish_reason": "stop"}]}],
    ]
    run = load(RUN.replace('available_tools = ["list_dir"]', 'nudge = { enabled = false }')).run(
        "go", home=home, retry=RetryPolicy(max_attempts=2, base_delay_s=0))
    run.wait(60)
    assert run.status == "complete", run.error
    [retry] = [e for e in run.events.snapshot() if e.kind == "model_retry"]
    assert "event stream broke off" in retry.reason or "request failed" in retry.reason


def test_a_broken_script_falls_back_to_the_next_model(home: Path, tmp_path: Path) -> None:
    from lev_nb import load

    configure(home, None, script="fn initialize(config) {")
    toml = RUN.replace('model = { provider = "chatty", model = "chat-small" }',
                       'model = { models = [{ provider = "chatty", model = "x" }, { provider = "mock", model = "m" }] }')
    run = load(toml).run("go", home=home)
    run.wait(60)
    assert run.status == "complete", run.error
    [fallback] = [e for e in run.events.snapshot() if e.kind == "model_fallback"]
    assert fallback.to_model == "mock/m" and "does not compile" in fallback.reason


# ----------------------------------------------------------------------------- address policy
@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
     "224.0.0.1", "255.255.255.255", "192.0.0.8", "192.0.2.1", "198.51.100.7", "203.0.113.9", "198.18.0.1",
     "240.0.0.1", "::1", "::", "fe80::1", "fd00::1", "fc00::5", "2001:db8::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
     "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:c0a8:0101::1", "ff02::1"],
)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert script_http.address_refusal(address) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert script_http.address_refusal(address) is None


def test_every_resolved_address_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(script_http.socket, "getaddrinfo", resolve)
    monkeypatch.setattr(script_http, "_resolved", {})
    with pytest.raises(script_http.ScriptHttpError) as info:
        script_http.request("GET", "https://mixed.example/x")
    assert info.value.kind == "api" and "10.0.0.7 (private)" in info.value.message
    assert "allow_local_network" in info.value.message


def test_a_kept_resolution_is_checked_again_on_every_call(chat: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    real = script_http.socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        asked.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(script_http.socket, "getaddrinfo", resolve)
    monkeypatch.setattr(script_http, "_resolved", {})
    url = f"http://localhost:{chat.port}/v1/models"
    assert "chat-small" in script_http.request("GET", url, allow_local=True)
    assert "chat-small" in script_http.request("GET", url, allow_local=True)
    assert asked.count("localhost") == 1  # the name was looked up once (connecting looks up the address)
    with pytest.raises(script_http.ScriptHttpError) as info:  # and its kept addresses are still checked
        script_http.request("GET", url)
    assert "loopback" in info.value.message
    script_http.request("GET", f"http://127.0.0.1:{chat.port}/v1/models", allow_local=True)
    assert list(script_http._resolved) == [("localhost", chat.port)]  # an IP literal is not looked up


def test_a_name_that_resolves_to_loopback_is_refused_not_only_literals(chat: ChatServer) -> None:
    with pytest.raises(script_http.ScriptHttpError) as info:
        script_http.request("GET", f"http://localhost:{chat.port}/v1/models")
    assert "loopback" in info.value.message
    assert chat.requests == []  # refused before any connection
    assert "chat-small" in script_http.request("GET", f"http://localhost:{chat.port}/v1/models", allow_local=True)


def test_only_http_and_https(chat: ChatServer) -> None:
    for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://x"):
        with pytest.raises(script_http.ScriptHttpError) as info:
            script_http.request("GET", url, allow_local=True)
        assert "only http and https" in info.value.message


def test_each_redirect_hop_is_checked(chat: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    real = script_http.address_refusal
    monkeypatch.setattr(script_http, "address_refusal",
                        lambda address: None if address == "127.0.0.1" else real(address))
    # The first hop (127.0.0.1, allowed by this test's policy) redirects to a link-local address.
    target = "http://169.254.169.254/latest/meta-data/"
    with pytest.raises(script_http.ScriptHttpError) as info:
        script_http.request("GET", f"http://127.0.0.1:{chat.port}/redirect?to={target}")
    assert "169.254.169.254 (link-local)" in info.value.message
    assert [r["path"] for r in chat.requests] == [f"/redirect?to={target}"]
    # A redirect within allowed addresses is followed.
    good = f"http://127.0.0.1:{chat.port}/v1/models"
    assert "chat-small" in script_http.request("GET", f"http://127.0.0.1:{chat.port}/redirect?to={good}")


def test_without_the_grant_a_provider_script_cannot_reach_a_local_server(
    home: Path, chat: ChatServer, token: None
) -> None:
    configure(home, chat, local=False)
    error = pytest.raises(ProviderError, ask, RhaiProvider("chatty", "m")).value
    assert error.kind == "api" and "[denied]" in error.message and "127.0.0.1 (loopback)" in error.message
    assert chat.requests == []

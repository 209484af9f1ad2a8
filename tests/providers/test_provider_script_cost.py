"""What a provider-script call costs (issue 29): the script is found and compiled once and looked at
again only after RECHECK_S (a change is still picked up), one shared engine serves every call, the
request reaches the script as plain data without a JSON round trip, and script HTTP keeps its
connections alive (a connection the server dropped is replaced without failing the call)."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import reply_json

from lev_nb.messages import (
    Message,
    ModelRequest,
    SystemBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from lev_nb.providers import ProviderError, rhai_provider, script_http
from lev_nb.providers.rhai_provider import RhaiProvider, request_map, shared_engine

SCRIPT = r'''
fn initialize(config) { #{ url: config.base_url, tag: config.tag ?? "first" } }
fn inference(state, request) {
    let reply = parse_json(http_post(state.url, to_json(#{ n: request.messages.len() }), #{}));
    #{ content: `${state.tag}:${reply.text}` }
}
'''


class KeepAlive:
    """An HTTP/1.1 server on 127.0.0.1 that counts the connections it accepted (over TLS with
    ``certificate``, a trustme leaf certificate for 127.0.0.1)."""

    def __init__(self, certificate: Any = None) -> None:
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                owner.connections += 1
                super().setup()

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                reply_json(self, {"text": "ok"})

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if certificate is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            certificate.configure_cert(context)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[KeepAlive]:
    found = KeepAlive()
    try:
        yield found
    finally:
        found.close()


def install(home: Path, url: str, script: str = SCRIPT) -> Path:
    (home / "providers").mkdir(parents=True, exist_ok=True)
    path = home / "providers" / "cheap.rhai"
    path.write_text(script, encoding="utf-8")
    (home / "config.toml").write_text(f'[security]\nallow_local_network = true\n[model_providers.cheap]\n'
                                      f'base_url = "{url}"\n', encoding="utf-8")
    return path


def ask(provider: RhaiProvider) -> str:
    request = ModelRequest(provider="cheap", model="m", messages=[Message("user", "hi")])
    return asyncio.run(provider.complete(request)).text


def test_the_script_file_is_not_looked_at_again_within_the_recheck_time(home: Path, server: KeepAlive,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb.settings import current

    monkeypatch.setattr(rhai_provider, "RECHECK_S", 3600.0)
    path = install(home, server.url)
    settings = current()
    assert ask(RhaiProvider("cheap", "m", settings)) == "first:ok"
    path.unlink()  # no lookup, no read: the compiled script answers
    assert ask(RhaiProvider("cheap", "m", settings)) == "first:ok"
    monkeypatch.setattr(rhai_provider, "RECHECK_S", 0.0)  # time to look again: the script is gone
    with pytest.raises(ProviderError) as caught:
        ask(RhaiProvider("cheap", "m", settings))
    assert caught.value.kind == "unknown_model"


def test_a_changed_script_is_picked_up_once_looked_at_again(home: Path, server: KeepAlive,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb.settings import current

    monkeypatch.setattr(rhai_provider, "RECHECK_S", 0.0)
    path = install(home, server.url)
    settings = current()
    assert ask(RhaiProvider("cheap", "m", settings)) == "first:ok"
    path.write_text(SCRIPT.replace('"first"', '"second!"'), encoding="utf-8")  # another size, whatever the clock
    assert ask(RhaiProvider("cheap", "m", settings)) == "second!:ok"


def test_one_engine_and_one_kept_connection_serve_many_calls(home: Path, server: KeepAlive) -> None:
    from lev_nb.settings import current

    install(home, server.url)
    provider = RhaiProvider("cheap", "m", current())
    request = ModelRequest(provider="cheap", model="m", messages=[Message("user", "hi")])

    async def five() -> list[str]:  # on one loop, as a run's model calls are
        return [(await provider.complete(request)).text for _ in range(5)]

    assert asyncio.run(five()) == ["first:ok"] * 5
    assert server.connections == 1
    assert shared_engine(30.0) is shared_engine(30.0)


def test_a_kept_connection_the_server_dropped_is_replaced(server: KeepAlive) -> None:
    assert script_http.request("POST", server.url, "{}", allow_local=True) == '{"text": "ok"}'
    key = next(k for k in script_http.POOL._idle if k[2] == server.server.server_address[1])
    (connection, _since), = script_http.POOL._idle[key]
    connection.sock.close()  # the server (or the network) ended the idle connection
    assert script_http.request("POST", server.url, "{}", allow_local=True) == '{"text": "ok"}'
    assert server.connections == 2


def test_script_http_sends_without_waiting_for_acknowledgements(server: KeepAlive) -> None:
    """http.client writes a request's headers and its body separately: with Nagle's algorithm on,
    the body waited for the server's (delayed) ACK of the headers, 40 ms on every call."""
    import socket

    assert script_http.request("POST", server.url, "{}", allow_local=True) == '{"text": "ok"}'
    key = next(k for k in script_http.POOL._idle if k[2] == server.server.server_address[1])
    (connection, _since), = script_http.POOL._idle[key]
    assert connection.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_script_http_over_tls_verifies_and_shares_one_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTPS connection used to build its own TLS context, loading the whole certificate
    store (about 35 ms of CPU) each time; one shared context now serves them all, and it still
    verifies the server's certificate."""
    import trustme

    authority = trustme.CA()
    server = KeepAlive(certificate=authority.issue_cert("127.0.0.1"))
    try:
        # The system's trust store does not know the test's authority: the certificate is refused.
        with pytest.raises(script_http.ScriptHttpError, match="CERTIFICATE_VERIFY_FAILED"):
            script_http.request("POST", server.url, "{}", allow_local=True)
        trusting = ssl.create_default_context()
        authority.configure_trust(trusting)
        monkeypatch.setattr(script_http, "_tls", trusting)

        def no_new_context(*args: object, **kwargs: object) -> ssl.SSLContext:
            raise AssertionError("a connection built a TLS context of its own")

        monkeypatch.setattr(ssl, "create_default_context", no_new_context)
        for _ in range(2):
            assert script_http.request("POST", server.url, "{}", allow_local=True) == '{"text": "ok"}'
            for kept in script_http.POOL._idle.values():  # the next call opens a new connection
                while kept:
                    kept.pop()[0].close()
        assert server.connections == 2  # two verified connections (the refused handshake never got a handler)
    finally:
        server.close()


def test_the_request_map_is_the_plain_data_a_json_round_trip_gave() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd"

    request = ModelRequest(
        provider="p", model="m", system=["sys"], system_blocks=[SystemBlock("sys", region="system", cache_tier=0)],
        messages=[Message("user", "hi"),
                  Message("assistant", [TextBlock("t"), ToolUseBlock("c1", "tool", {"a": (1, 2), 3: Odd()})]),
                  Message("user", [ToolResultBlock("c1", "done", is_error=True)])],
        tools=[ToolSpec("tool", "does", {"type": "object", "properties": {"a": {"type": "array"}}})],
        extra={"odd": Odd(), "nested": {"t": (1, "x")}},
    )
    expected: dict[str, Any] = json.loads(json.dumps({
        "system": [{"text": "sys", "cache_hint": "stable", "region": "system", "volatility": "rewritten"}],
        "messages": [{"role": "user", "content": "hi"},
                     {"role": "assistant", "content": [{"type": "text", "text": "t"},
                                                       {"type": "tool_use", "id": "c1", "name": "tool",
                                                        "input": {"a": (1, 2), 3: Odd()}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "done",
                                                   "is_error": True}]}],
        "tools": [{"name": "tool", "description": "does",
                   "parameters": {"type": "object", "properties": {"a": {"type": "array"}}}}],
        "model": "m", "max_tokens": request.max_tokens, "temperature": None, "request_timeout_secs": None,
        "extra": {"odd": Odd(), "nested": {"t": (1, "x")}},
    }, default=str))
    assert request_map(request) == expected


def test_a_script_is_handed_each_conversation_block_converted_once() -> None:
    blocks = [TextBlock("t"), ToolUseBlock("c1", "tool", {"a": (1, 2)}), ToolResultBlock("c1", "done", is_error=True)]
    request = ModelRequest(provider="p", model="m", system=["sys"],
                           messages=[Message("user", "hi"), Message("assistant", blocks[:2]),
                                     Message("user", blocks[2:])])
    engine = shared_engine(None)
    echo = engine.compile("fn echo(request) { request.messages }")
    plain = request_map(request)["messages"]
    held = request_map(request, held=True)
    kept = [rhai_provider.held_value(block) for block in blocks]
    # The script sees what the plain map holds, from values converted once and kept with the blocks.
    assert engine.call(echo, "echo", held) == plain
    assert [rhai_provider.held_value(block) for block in blocks] == kept
    assert all(a is b for a, b in zip(kept, (rhai_provider.held_value(block) for block in blocks)))
    later = request_map(request, held=True)
    assert later["messages"][1]["content"][0] is held["messages"][1]["content"][0]
    # A script that changes its request changes its own copy: the next call sees the blocks as they are.
    spoil = engine.compile('fn spoil(request) { request.messages[1].content[0].text = "spoilt"; 0 }')
    engine.call(spoil, "spoil", later)
    assert engine.call(echo, "echo", request_map(request, held=True)) == plain
    # Nothing is stashed on the blocks: they serialise (a run's transcript) and copy as before.
    import copy
    import dataclasses

    for block in blocks:
        assert set(vars(block)) == {f.name for f in dataclasses.fields(block)}
        assert copy.deepcopy(block) == block
    # A block that is gone takes its converted value with it.
    keys = [id(block) for block in blocks]
    assert all(key in rhai_provider._HELD for key in keys)
    del blocks, block, request, held, later, kept
    import gc

    gc.collect()
    assert not any(key in rhai_provider._HELD for key in keys)

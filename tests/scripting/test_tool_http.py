"""Rhai tool scripts reach the network (issue 24): ``http_get`` / ``http_post`` under the address
policy and timeout provider scripts obey, the pure ``encode_uri`` and ``html_to_text``, and the
``web_fetch`` tool the research agent ships, tried against a server on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import BLUEPRINTS, call, events_of, say

PAGE = ("<html><head><title>Hi</title><script>track()</script></head><body><h1>Tides</h1>"
        "<p>The moon pulls the sea.</p></body></html>")
SHELL_PAGE = "<!doctype html><html><body><div id=root></div>" + "<script>" + "x" * 5000 + "</script></body></html>"
ECHO = """// @tool echo_post
// @description POST a value and return what the server said
// @param value string required "what to send"
// @requires network
let q = encode_uri(params.value);
http_post(`${params.base}/echo?q=${q}`, params.value, #{ "content-type": "text/plain" })
"""


class _Server:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, body: str, ctype: str = "text/html") -> None:
                data = body.encode()
                self.send_response(200)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.seen.append(("GET", self.path, ""))
                self._reply(SHELL_PAGE if self.path == "/app" else PAGE)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                server.seen.append(("POST", self.path, body))
                self._reply(json.dumps({"path": self.path, "body": body}), "application/json")

            def log_message(self, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def site() -> Iterator[_Server]:
    server = _Server()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    folder = tmp_path / "agent"
    (folder / "tools").mkdir(parents=True)
    shutil.copy(BLUEPRINTS / "research-brief" / "tools" / "web_fetch.rhai", folder / "tools" / "web_fetch.rhai")
    (folder / "tools" / "echo_post.rhai").write_text(ECHO.replace("// @param value", '// @param base string required "server"\n// @param value'))
    (folder / "agent.leviath").write_text(
        '[agent]\nname = "fetcher"\n[stages.work]\navailable_tools = ["web_fetch", "echo_post"]\n'
        "nudge = { enabled = false }\n[stages.work.transitions]\n")
    return folder


def _run(engine, agent: Path, turns: list) -> list[str]:
    import lev_nb

    run, _ = engine.run(lev_nb.load(agent), [*turns, say("ok")], allow=["web_fetch", "echo_post"])
    assert run.status == "complete", run.error
    return [e.summary for e in events_of(run, "tool_finished")]


def _local_network(home: Path, allowed: bool) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f"[security]\nallow_local_network = {str(allowed).lower()}\n")


def test_web_fetch_returns_readable_text(engine, agent: Path, site: _Server, home: Path) -> None:
    _local_network(home, True)
    page, app = _run(engine, agent, [call("web_fetch", url=f"{site.url}/tides"), call("web_fetch", url=f"{site.url}/app")])
    assert page == "Tides The moon pulls the sea."  # (the summary joins the lines; <head> is no prose)
    assert "track()" not in page
    assert app.startswith("[web_fetch: ") and "rendered in the browser" in app
    assert [s[:2] for s in site.seen] == [("GET", "/tides"), ("GET", "/app")]


def test_http_post_and_encode_uri(engine, agent: Path, site: _Server, home: Path) -> None:
    _local_network(home, True)
    (answer,) = _run(engine, agent, [call("echo_post", base=site.url, value="a b&c")])
    assert json.loads(answer) == {"path": "/echo?q=a%20b%26c", "body": "a b&c"}


def test_loopback_is_refused_unless_the_user_allows_it(engine, agent: Path, site: _Server, home: Path) -> None:
    _local_network(home, False)
    (fetched,) = _run(engine, agent, [call("web_fetch", url=f"{site.url}/tides")])
    assert fetched.startswith("[web_fetch could not fetch") and "loopback" in fetched
    assert site.seen == []

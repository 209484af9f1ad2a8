"""``web_search`` (issue 24; upstream tools.md "Web access"): the script tool the research agent
ships searches Brave Search when a search key is readable (``BRAVE_API_KEY`` in the environment and
in ``[security] allow_env_vars``), tried against a stand-in on 127.0.0.1; without one it is not
offered, and the run, ``lev tools`` and ``lev validate`` say why."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support import BLUEPRINTS, call, reply_json, say

KEY = "brave-test-key-5f3a9c"
HITS = [
    {"title": "Tides", "url": "https://example.org/tides", "description": "The <strong>moon</strong> pulls the sea.",
     "page_age": "2026-11-30T08:00:00"},
    {"title": "Neap tides", "url": "https://example.org/neap", "description": "Weaker tides.", "age": "3 days ago"},
    {"title": "Spring tides", "url": "https://example.org/spring", "description": "Stronger tides."},
]


class _Brave:
    """A stand-in for the Brave Search API: ``/res/v1/web/search`` answers with ``HITS`` (none for
    the query ``nothing``), and 401 without the key."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, list[str]], str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                token = self.headers.get("x-subscription-token")
                server.seen.append((query, token))
                if parts.path != "/res/v1/web/search" or token != KEY:
                    status, body = 401, {"error": "unauthorized"}
                else:
                    count = int(query.get("count", ["5"])[0])
                    hits = [] if query["q"] == ["nothing"] else HITS[:count]
                    status, body = 200, {"type": "search", "web": {"results": hits}}
                reply_json(self, body, status)

            def log_message(self, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def brave(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Brave]:
    server = _Brave()
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", server.url)
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


AGENT = ('[agent]\nname = "searcher"\n[stages.work]\navailable_tools = ["web_search"]\n'
         "nudge = { enabled = false }\n[stages.work.transitions]\n")


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    folder = tmp_path / "agent"
    (folder / "tools").mkdir(parents=True)
    shutil.copy(BLUEPRINTS / "research-brief" / "tools" / "web_search.rhai", folder / "tools" / "web_search.rhai")
    (folder / "agent.leviath").write_text(AGENT)
    return folder


def _config(home: Path, allow_key: bool) -> None:
    home.mkdir(parents=True, exist_ok=True)
    listed = 'allow_env_vars = ["BRAVE_API_KEY"]\n' if allow_key else ""
    (home / "config.toml").write_text("[security]\nallow_local_network = true\n" + listed)


def _run(engine, agent: Path, turns: list) -> tuple[Any, Any]:
    import lev_nb

    run, model = engine.run(lev_nb.load(agent), [*turns, say("ok")], allow=["web_search"])
    assert run.status == "complete", run.error
    return run, model


def _results(model) -> list[str]:
    """The tool results the model was shown, in order (whole, unlike an event's summary)."""
    from lev_nb.messages import ToolResultBlock

    last = model.requests[-1]
    return [b.content for m in last.messages for b in m.blocks() if isinstance(b, ToolResultBlock)]


def test_it_searches_with_the_key_and_returns_results(engine, agent: Path, brave: _Brave, home: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", KEY)
    _config(home, allow_key=True)
    run, model = _run(engine, agent, [call("web_search", query="tides & moon", count=2, freshness="pw"),
                                      call("web_search", query="nothing")])
    assert "web_search" in [t.name for t in model.requests[0].tools]
    found, empty = _results(model)
    assert json.loads(found) == [
        {"title": "Tides", "url": "https://example.org/tides", "snippet": "The moon pulls the sea.",
         "date": "2026-11-30T08:00:00"},
        {"title": "Neap tides", "url": "https://example.org/neap", "snippet": "Weaker tides.", "date": "3 days ago"},
    ]
    assert empty.startswith('[web_search found nothing for "nothing"')
    (first, token), _ = brave.seen
    assert first == {"q": ["tides & moon"], "count": ["2"], "freshness": ["pw"]} and token == KEY
    assert KEY not in json.dumps(run.meta)  # the key reached the search engine, not the record
    assert not [w for w in run.warnings if w.code == "tool-unavailable"]
    assert (run.meta["flags"]["searches_run"], run.meta["flags"]["searches_empty"]) == (2, 1)


def test_without_a_key_it_is_not_offered_and_the_run_says_why(engine, agent: Path, brave: _Brave, home: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    _config(home, allow_key=False)
    run, model = _run(engine, agent, [call("web_search", query="tides")])
    assert "web_search" not in [t.name for t in model.requests[0].tools]
    [told] = [w for w in run.warnings if w.code == "tool-unavailable"]
    assert "'web_search' is not offered in stage 'work'" in told.message and "set BRAVE_API_KEY" in told.message
    assert brave.seen == []


def test_a_key_the_config_does_not_let_scripts_read(engine, agent: Path, brave: _Brave, home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", KEY)
    _config(home, allow_key=False)
    run, model = _run(engine, agent, [call("web_search", query="tides")])
    assert "web_search" not in [t.name for t in model.requests[0].tools]
    [told] = [w for w in run.warnings if w.code == "tool-unavailable"]
    assert "BRAVE_API_KEY is set" in told.message and 'allow_env_vars = ["BRAVE_API_KEY"]' in told.message


def test_lev_tools_and_lev_validate_explain_it(lev, agent: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    (home / "tools").mkdir(parents=True)
    shutil.copy(agent / "tools" / "web_search.rhai", home / "tools" / "web_search.rhai")
    listed = lev("tools")
    assert "web_search(query, count?, freshness?)  [requires network, search]" in listed.stdout
    assert "unavailable, not offered to any agent: no search engine: set BRAVE_API_KEY" in listed.stdout
    [tool] = json.loads(lev("tools", "--json").stdout)["tools"]
    assert tool["available"] is False and "BRAVE_API_KEY" in tool["unavailable_reason"]
    checked = lev("validate", str(agent), "--json")
    findings = json.loads(checked.stdout)["findings"]
    assert [(f["code"], f["severity"], f["stage"]) for f in findings if f["code"] == "tool-unavailable"] == [
        ("tool-unavailable", "warning", "work")]
    monkeypatch.setenv("BRAVE_API_KEY", KEY)
    (home / "config.toml").write_text('[security]\nallow_env_vars = ["BRAVE_API_KEY"]\n')
    assert json.loads(lev("tools", "--json").stdout)["tools"][0]["available"] is True
    assert "tool-unavailable" not in lev("validate", str(agent), "--json").stdout

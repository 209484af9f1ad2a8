"""The completion webhook: one JSON POST of the run's result, to a real local HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support import OUTPUT_STAGE, call, events_of, say

from lev_nb.engine.webhook import completion_payload, post_json


class Receiver:
    """An HTTP server on 127.0.0.1 (port 0) recording every POST; answers with ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.received = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                receiver.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                receiver.received.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll interval: shutdown() waits up to one interval (0.5 s by default) per test.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hooks/lev"

    def json(self, index: int = 0) -> dict[str, Any]:
        return json.loads(self.requests[index]["body"].decode("utf-8"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def failing_receiver() -> Iterator[Receiver]:
    server = Receiver(status=500)
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


# ------------------------------------------------------------------------- from Python
def test_the_webhook_receives_the_result_json(engine, receiver):
    turns = [call("submit_output", content='{"verdict": "ship it"}', artifacts=["r.md"]), say("ok")]
    run, _ = engine.run(OUTPUT_STAGE, turns, webhook=receiver.url, output_format="json")
    assert run.status == "complete", run.error
    assert len(receiver.requests) == 1  # posted before the run counts as finished
    request = receiver.requests[0]
    assert request["path"] == "/hooks/lev"
    assert request["headers"]["Content-Type"] == "application/json"
    payload = receiver.json()
    assert payload["run_id"] == run.run_id
    assert payload["agent_name"] == "engine-test"
    assert payload["status"] == "complete"
    assert payload["error"] is None
    assert payload["stage"] == "answer"
    assert payload["stage_history"] == ["answer"]
    assert payload["flags"]["produced_output"] is True
    assert payload["final_output"] == run.result.to_json()
    assert payload["final_output"] == {
        "content": '{"verdict": "ship it"}',
        "format": "json",
        "stage": "answer",
        "submitted_at": run.result.submitted_at,
        "truncated": False,
        "artifacts": ["r.md"],
    }


def test_a_run_ending_without_its_owed_output_posts_no_output(engine, receiver):
    run, _ = engine.run(OUTPUT_STAGE, [say("a"), say("b"), say("c"), say("d")], webhook=receiver.url)
    assert run.status == "complete"
    payload = receiver.json()
    assert payload["status"] == "complete"
    assert payload["error"] is None
    assert payload["final_output"] is None
    assert payload["flags"]["output_forced"] == 1


def test_unicode_survives_the_post(engine, receiver):
    _run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="Zürich ✓ 😀"), say("ok")], webhook=receiver.url)
    assert receiver.json()["final_output"]["content"] == "Zürich ✓ 😀"


def test_a_failing_webhook_is_a_warning_and_the_run_still_completes(engine, failing_receiver, home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[webhook]\nbase_delay_ms = 1\n")  # the default 3 retries, quickly
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("ok")], webhook=failing_receiver.url)
    assert run.status == "complete", run.error
    assert len(failing_receiver.requests) == 4
    warnings = [e.message for e in events_of(run, "warning")]
    assert any("webhook" in w and "500" in w for w in warnings)


def test_an_unreachable_webhook_is_a_warning(engine):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("ok")],
                        webhook=f"http://127.0.0.1:{port}/")
    assert run.status == "complete", run.error
    assert any("webhook failed" in e.message for e in events_of(run, "warning"))


def test_on_complete_and_webhook_both_fire(engine, receiver):
    seen: list[str] = []
    _run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("ok")],
                        webhook=receiver.url, on_complete=lambda r: seen.append(r.result.content))
    assert seen == ["42"]
    assert receiver.json()["final_output"]["content"] == "42"


def test_post_json_refuses_non_http_urls():
    with pytest.raises(OSError, match="http"):
        post_json("file:///some/file", {})


def test_an_https_webhook_is_verified_with_the_shared_tls_context(receiver, monkeypatch):
    """A delivery over HTTPS checks the receiver's certificate, with the one context script HTTP
    uses (building a context per delivery loaded the whole trust store each time)."""
    import ssl

    import trustme

    from lev_nb.engine.webhook import DeliveryError
    from lev_nb.providers import script_http

    authority = trustme.CA()
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(served)
    receiver.server.socket = served.wrap_socket(receiver.server.socket, server_side=True)
    url = receiver.url.replace("http://", "https://")
    with pytest.raises(DeliveryError, match="certificate"):
        post_json(url, {"n": 1})  # the system's trust store does not know the test's authority
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    monkeypatch.setattr(script_http, "_tls", trusting)
    assert post_json(url, {"n": 2}) == 200
    assert receiver.json() == {"n": 2}


def test_completion_payload_without_output():
    meta = {"run_id": "r", "agent_name": "a", "status": "cancelled", "current_stage": "s",
            "stage_history": ["s"], "flags": {"empty_output": True}}
    assert completion_payload(meta, None) == {
        "run_id": "r", "agent_name": "a", "status": "cancelled", "error": None, "stage": "s",
        "stage_history": ["s"], "flags": {"empty_output": True}, "final_output": None,
    }


# ------------------------------------------------------------------------- from the CLI
def test_lev_run_webhook_posts_the_result(tmp_path, receiver, lev):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "hooked"\n' + OUTPUT_STAGE)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([call("submit_output", content="<ok/>"), say("done")]))
    work = tmp_path / "work"
    work.mkdir()
    proc = lev("run", str(agent), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work),
               "--output-format", "xml", "--webhook", receiver.url, "--quiet")
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    assert len(receiver.requests) == 1
    payload = receiver.json()
    assert payload["run_id"] == run_id
    assert payload["agent_name"] == "hooked"
    assert payload["status"] == "complete"
    assert payload["final_output"]["content"] == "<ok/>"
    assert payload["final_output"]["format"] == "xml"


# Regressions: these used to raise out of the run's clean-up, so run.wait() raised and
# on_complete was never called.
@pytest.mark.parametrize("url", ["http://[::1/", "http://bad host/"])
def test_a_malformed_webhook_url_is_a_warning_and_the_run_ends_normally(engine, url):
    seen: list[str] = []
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("ok")],
                        webhook=url, on_complete=lambda r: seen.append(r.status))
    assert run.status == "complete", run.error
    assert seen == ["complete"]
    assert any("could not be delivered" in e.message for e in events_of(run, "warning"))


def test_a_receiver_that_does_not_speak_http_is_a_warning(engine):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    got: list[bytes] = []

    def answer_garbage() -> None:
        conn, _ = server.accept()
        with conn:
            got.append(conn.recv(65536))
            conn.sendall(b"this is not an HTTP response\r\n\r\n")

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    try:
        run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="42"), say("ok")],
                            webhook=f"http://127.0.0.1:{port}/")
    finally:
        thread.join(30)
        server.close()
    assert run.status == "complete", run.error
    assert got and got[0].startswith(b"POST / HTTP/1.1")
    assert any("could not be delivered" in e.message for e in events_of(run, "warning"))


# ------------------------------------------------------------------------- issue 12 item 6
def test_a_trickling_receiver_cannot_hold_the_delivery_past_its_deadline():
    import socket
    import time

    stop = threading.Event()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def trickle() -> None:  # one byte of a status line every 0.1 s, for as long as the test lasts
        conn, _ = server.accept()
        with conn:
            while not stop.is_set():
                try:
                    conn.sendall(b"H")
                except OSError:
                    return
                time.sleep(0.1)

    threading.Thread(target=trickle, daemon=True).start()
    outcome: list[BaseException] = []

    def deliver() -> None:
        try:
            post_json(f"http://127.0.0.1:{server.getsockname()[1]}/", {}, timeout=0.5)
        except OSError as exc:
            outcome.append(exc)

    sender = threading.Thread(target=deliver, daemon=True)
    sender.start()
    sender.join(60)  # a per-read timeout would never end: each read gets its byte in time
    stop.set()
    server.close()
    assert not sender.is_alive()
    assert len(outcome) == 1 and "did not answer within 0.5 s" in str(outcome[0])



def test_a_reply_cut_off_at_the_deadline_is_not_a_delivery():
    """A status line sent in time, then the headers too slowly: at the deadline the socket is shut
    and the headers end at end-of-input, so the reply parses as 200; it is still a timeout."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    cut = threading.Event()

    def reply() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
            cut.wait(60)  # the rest never comes before the deadline

    threading.Thread(target=reply, daemon=True).start()
    try:
        with pytest.raises(OSError, match="did not answer within 0.5 s"):
            post_json(f"http://127.0.0.1:{server.getsockname()[1]}/", {}, timeout=0.5)
    finally:
        cut.set()
        server.close()

def test_lev_run_shows_a_failed_delivery_on_stderr(tmp_path, failing_receiver, lev):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "hooked"\n' + OUTPUT_STAGE)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([call("submit_output", content="42"), say("done")]))
    work = tmp_path / "work"
    work.mkdir()
    proc = lev("run", str(agent), "--task", "t", "--model", f"scripted:{script}", "--workdir", str(work),
               "--webhook", failing_receiver.url, "--quiet")
    assert proc.returncode == 1, proc.stderr  # the run completed, but what was asked was not delivered
    assert "lev run: the result was not delivered to the webhook: the webhook answered HTTP 500" in proc.stderr


# ------------------------------------------------------------------------- [webhook] delivery (issue 25)
def test_a_failing_receiver_is_tried_again_with_backoff(engine, failing_receiver, home):
    """[webhook] max_retries / base_delay_ms: a 5xx is tried again, the delay doubling; a receiver
    that comes back gets the result once."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[webhook]\nmax_retries = 3\nbase_delay_ms = 10\nmax_delay_ms = 40\n")
    original = failing_receiver.server.RequestHandlerClass.do_POST

    def flaky(handler) -> None:  # two 500s, then 200
        failing_receiver.status = 500 if len(failing_receiver.requests) < 2 else 200
        original(handler)

    failing_receiver.server.RequestHandlerClass.do_POST = flaky
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="done"), say("ok")], webhook=failing_receiver.url)
    assert run.status == "complete" and len(failing_receiver.requests) == 3
    assert not [e for e in events_of(run, "warning") if "webhook" in e.message]


def test_retries_stop_at_the_limit_and_say_how_many(engine, failing_receiver, home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[webhook]\nmax_retries = 2\nbase_delay_ms = 1\n")
    run, _ = engine.run(OUTPUT_STAGE, [call("submit_output", content="done"), say("ok")], webhook=failing_receiver.url)
    assert run.status == "complete" and len(failing_receiver.requests) == 3
    (warning,) = [e.message for e in events_of(run, "warning") if "webhook" in e.message]
    assert "HTTP 500" in warning and "after 3 attempts" in warning


def test_a_receiver_refusing_the_payload_is_not_asked_again():
    from lev_nb.engine.webhook import deliver

    server = Receiver(status=404)
    server.thread.start()
    slept: list[float] = []
    try:
        with pytest.raises(OSError, match="HTTP 404"):
            deliver(server.url, {"a": 1}, max_retries=5, sleep=slept.append)
        assert len(server.requests) == 1 and slept == []
        server.status = 429  # too many requests: worth another try, after the backoff
        with pytest.raises(OSError, match="after 3 attempts"):
            deliver(server.url, {"a": 1}, max_retries=2, base_delay_ms=100, max_delay_ms=150, sleep=slept.append)
        assert slept == [0.1, 0.15]
    finally:
        server.server.shutdown()
        server.server.server_close()

"""The completion webhook: one JSON POST with a finished run's result (``webhook=`` of
``start_run``; docs/runs.md#starting-a-run)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any

WEBHOOK_TIMEOUT_S = 10.0
# The start of the warning a failed delivery leaves (``lev run`` shows these on stderr).
FAILURE_PREFIX = "the completion webhook failed"


class DeliveryError(OSError):
    """A webhook that was not delivered; ``retryable`` when another attempt may succeed (no answer
    in time, no connection, HTTP 429 or 5xx), not when the receiver refused the payload or did not
    speak HTTP."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def completion_payload(meta: dict[str, Any], final_output: Any) -> dict[str, Any]:
    """What the webhook receives: the run's identity, status, flags and final output."""
    return {
        "run_id": meta["run_id"],
        "agent_name": meta["agent_name"],
        "status": meta["status"],
        "error": meta.get("error"),
        "stage": meta.get("current_stage"),
        "stage_history": list(meta.get("stage_history", [])),
        "flags": dict(meta.get("flags", {})),
        "final_output": final_output.to_json() if final_output is not None else None,
    }


def post_json(url: str, payload: dict[str, Any], timeout: float = WEBHOOK_TIMEOUT_S) -> int:
    """POST ``payload`` as JSON to ``url``; returns the HTTP status (raises OSError on failure).

    ``timeout`` is one deadline for the whole delivery (connect, send, the reply's status line and
    headers), not per read: a receiver that trickles a byte every second cannot hold a run open.
    """
    if not url.startswith(("http://", "https://")):
        raise DeliveryError(f"webhook URL must start with http:// or https://, got '{url}'", False)
    deadline = time.monotonic() + timeout
    timer: threading.Timer | None = None
    expired = threading.Event()
    conn: http.client.HTTPConnection | None = None
    try:
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            raise ValueError("no host")
        if parts.scheme == "https":
            from lev_nb.providers.script_http import tls_context  # loading the trust store once, not per delivery

            conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=tls_context())
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        conn.connect()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        # Reads and writes block on the socket; at the deadline, shutting it down wakes them.
        timer = threading.Timer(remaining, _expire, args=(conn, expired))
        timer.daemon = True
        timer.start()
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", "User-Agent": "lev_nb"})
        status = int(conn.getresponse().status)
        if expired.is_set():  # a reply cut off at the deadline can still parse (headers end at EOF)
            raise TimeoutError
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise DeliveryError(f"the webhook at '{url}' did not answer within {timeout:g} s", True) from None
        if isinstance(exc, OSError):
            reason = exc.strerror or exc  # "Connection refused", not "[Errno 111] Connection refused"
            raise DeliveryError(f"could not reach '{url}': {reason}", True) from None
        # A malformed URL or a reply that is not HTTP: still only a failed delivery, so the run
        # (which posts from its clean-up) ends normally and reports it as a warning.
        raise DeliveryError(f"the webhook could not be delivered to '{url}': {exc}", False) from None
    finally:
        if timer is not None:
            timer.cancel()
        if conn is not None:
            conn.close()
    if status >= 400:
        raise DeliveryError(f"the webhook answered HTTP {status}", status >= 500 or status == 429)
    return status


def deliver(url: str, payload: dict[str, Any], *, max_retries: int = 0, base_delay_ms: int = 500,
            max_delay_ms: int = 30000, timeout_secs: float = WEBHOOK_TIMEOUT_S,
            sleep: Any = time.sleep) -> int:
    """:func:`post_json`, tried again after a failure that may pass (no answer, a refused or reset
    connection, HTTP 429 or 5xx) up to ``max_retries`` times, the delay doubling from
    ``base_delay_ms`` up to ``max_delay_ms`` (``[webhook]`` of config.toml). A 4xx other than 429
    is the receiver refusing the payload: not tried again. Raises OSError saying how many attempts
    were made."""
    attempts = 0
    while True:
        attempts += 1
        try:
            return post_json(url, payload, timeout=timeout_secs)
        except DeliveryError as exc:
            if attempts > max_retries or not exc.retryable:
                if attempts > 1:
                    raise DeliveryError(f"{exc} (after {attempts} attempts)", False) from None
                raise
        sleep(min(base_delay_ms * 2 ** (attempts - 1), max_delay_ms) / 1000)


def _expire(conn: http.client.HTTPConnection, expired: threading.Event) -> None:
    expired.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

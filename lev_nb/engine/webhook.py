"""The completion webhook: one JSON POST with a finished run's result (``webhook=`` of
``start_run``; spec/runtime.md §9, ``callback_url``)."""

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
        raise OSError(f"webhook URL must start with http:// or https://, got '{url}'")
    deadline = time.monotonic() + timeout
    timer: threading.Timer | None = None
    expired = threading.Event()
    conn: http.client.HTTPConnection | None = None
    try:
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            raise ValueError("no host")
        connection = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = connection(parts.hostname, parts.port, timeout=timeout)
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
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise OSError(f"the webhook at '{url}' did not answer within {timeout:g} s") from None
        if isinstance(exc, OSError):
            reason = exc.strerror or exc  # "Connection refused", not "[Errno 111] Connection refused"
            raise OSError(f"could not reach '{url}': {reason}") from None
        # A malformed URL or a reply that is not HTTP: still only a failed delivery, so the run
        # (which posts from its clean-up) ends normally and reports it as a warning.
        raise OSError(f"the webhook could not be delivered to '{url}': {exc}") from None
    finally:
        if timer is not None:
            timer.cancel()
        if conn is not None:
            conn.close()
    if status >= 400:
        raise OSError(f"the webhook answered HTTP {status}")
    return status


def _expire(conn: http.client.HTTPConnection, expired: threading.Event) -> None:
    expired.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

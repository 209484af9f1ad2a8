"""The completion webhook: one JSON POST with a finished run's result (``webhook=`` of
``start_run``; spec/runtime.md §9, ``callback_url``)."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any

WEBHOOK_TIMEOUT_S = 10.0


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
    """POST ``payload`` as JSON to ``url``; returns the HTTP status (raises OSError on failure)."""
    if not url.startswith(("http://", "https://")):
        raise OSError(f"webhook URL must start with http:// or https://, got '{url}'")
    try:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(
            url, data=body, method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "lev_nb"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        raise OSError(f"the webhook answered HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        reason = getattr(exc.reason, "strerror", None) or exc.reason
        raise OSError(f"could not reach '{url}': {reason}") from None
    except TimeoutError:
        raise OSError(f"'{url}' did not answer within {timeout:g} s") from None
    except (ValueError, http.client.HTTPException) as exc:
        # A malformed URL or a reply that is not HTTP: still only a failed delivery, so the run
        # (which posts from its clean-up) ends normally and reports it as a warning.
        raise OSError(f"the webhook could not be delivered to '{url}': {exc}") from None

"""Issue 26: what another process leaves in a run's ``inbox/`` cannot wedge the run.

A JSON file nested too deep to parse, a file too large, a directory named ``x.json``: each is set
aside once (renamed ``*.rejected``) with one warning, and the run goes on to take the answer that
follows and end normally."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support import RUN_TIMEOUT_S, call, events_of, next_request, say

from lev_nb.store import RunStore
from lev_nb.store.files import INBOX_ENTRY_LIMIT

ASK = """
[stages.work]
available_tools = ["ask_user_text"]
allow_blocking_tools = true
[stages.work.transitions]
"""


def _drop(folder: Path, name: str, data: bytes | None) -> None:
    """Write an entry as another process would (a dot-name renamed into place)."""
    if data is None:
        (folder / name).mkdir()
        return
    (folder / f".{name}").write_bytes(data)
    (folder / f".{name}").rename(folder / name)


@pytest.mark.parametrize(("what", "data"), [
    ("deep", b"[" * 100_000 + b"]" * 100_000),
    ("deep-object", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    ("large", json.dumps({"type": "message", "text": "x" * (INBOX_ENTRY_LIMIT + 10)}).encode()),
    ("directory", None),
])
def test_a_hostile_inbox_entry_is_set_aside_once(engine, what: str, data: bytes | None) -> None:
    run, model = engine.start(ASK, [call("ask_user_text", prompt="Your name?"), say("ok")], interactive=True)
    request = next_request(run)
    store = RunStore(run.run_id, home=engine.home)
    folder = Path(run.run_dir) / "inbox"
    folder.mkdir(exist_ok=True)
    _drop(folder, f"00000000000000000001-{what}.json", data)
    # The bad entry is met by the waiting run's polls (every 0.5 s) before the answer arrives.
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not any(p.name.endswith(".rejected") for p in folder.iterdir()) and time.monotonic() < deadline:
        assert not run.done(), run.error
        time.sleep(0.05)
    store.post_inbox({"type": "response", "request_id": request.id, "answer": "Grace"})
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    assert events_of(run, "interaction_resolved")[0].source == "inbox"
    warnings = [e.message for e in events_of(run, "warning") if "inbox" in e.message]
    assert len(warnings) == 1 and f"{what}.json" in warnings[0] and "rejected" in warnings[0]
    assert [p.name for p in folder.iterdir()] == [f"00000000000000000001-{what}.json.rejected"]

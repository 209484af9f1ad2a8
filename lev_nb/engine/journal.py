"""The run's journal, and replaying it when a run is resumed (docs/runs.md#pausing-and-resuming: each
inference and each finished tool call journaled before the engine acts on it).

``journal.jsonl`` in the run folder holds, one JSON object a line, what a run cannot recompute:

- ``{"t": "seed", "i", "text"}``: a region seed's text (a command seed ran a program);
- ``{"t": "model", "n", "purpose", "stage", "provider", "model", "response" | "error"}``: every model
  call's outcome, numbered in call order (a failure that ended a call, after its retries, too:
  the run's fallbacks and error edges follow from it);
- ``{"t": "tool", "turn", "call_id", "name", "content", "is_error", "modified_path"}``: a tool
  call's result (or its denial), keyed by the number of the model turn that asked for it;
- ``{"t": "call", "turn", "call_id", "name", "arguments", "at"}``: a tool call that may change
  something (not a read-only tool) is about to run; with no ``tool`` entry after it, the call was
  in flight when the run's process stopped, and a resume reports it as interrupted instead of
  running it again (upstream's daemon does the same);
- ``{"t": "fan_out", "turn", "call_id", "workers"}``: what a fan-out's workers brought back;
- ``{"t": "spent", "turn", "call_id", "usage"}``: what the workers of a fan-out that paused cost
  (the resumed run starts them again and keeps this in its totals);
- ``{"t": "answer", "turn", "id", "answer"}``: a person's answer to request ``id`` (an approval,
  a blocking tool's question, a checkpoint), journaled before the run acts on it, so a resume
  neither asks again nor loses a grant;
- ``{"t": "spawn", "turn", "call_id", "child", "replaces"?}``: ``spawn_agent`` started the child
  run ``child`` (journaled before it starts, so a resume never starts a second one); ``replaces``:
  a resumed run started it again for a sub-agent of its previous life that paused;
- ``{"t": "child", "id", "status", "text", "usage"}``: a sub-agent ended: what ``wait_for_agent``
  would say of it, and what it cost (status ``paused``: it paused, or was stopped because its
  parent paused; a resume starts it again);
- ``{"t": "rewind", "n"}``: model calls from ``n`` on (and the tool results of those turns) no
  longer count (a resumed run took another path from there, or retries what paused it).

Entries go through the record writer (:mod:`lev_nb.store.writer`), in order. Most are queued, as the
run's events are: if the process is killed before they reach the disk, a resume asks the model again
or runs a read-only tool again, which changes nothing outside. What must never happen twice is
written through before the engine goes on: the ``call`` entry before a tool that may change
something runs, its ``tool`` entry once it has, a ``spawn`` before the child starts, and what
sub-agents and fan-out workers brought back. So a run killed at any moment never repeats a side
effect on resume. (The engine wrote every entry itself, four system calls each on the engine
thread: a quarter of its time in a run of many agents.)

A resumed run is the same run executed again from its start with the journal standing in for the
outside world: model calls are answered from it (the provider is not asked), a completed tool
call's result is taken from it (the tool is not run again), seeds read from it. The engine's own
logic recomputes everything else, so the context, the stage, the counters and meta.json come out
as they were. While it replays, the run writes nothing to events.jsonl, transcript.jsonl or
meta.json (the record already holds it); at the first thing the journal does not hold, the run
goes live and its record continues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lev_nb.engine.loop import engine_loop
from lev_nb.messages import ModelRequest, ModelResponse, ToolCall, Usage
from lev_nb.providers.base import ProviderError
from lev_nb.store import JOURNAL, RunStore, encode_line
from lev_nb.store.writer import RecordWriter, record_writer

__all__ = ["JOURNAL", "Journal", "PAUSE_KINDS"]

#: Error kinds of a model call that pause a run (credits, unreachable): at the end of the journal
#: they are dropped on resume, so the resumed run asks again.
PAUSE_KINDS = frozenset({"credits", "transport"})


def response_json(response: ModelResponse) -> dict[str, Any]:
    """A model response as journal data."""
    return {
        "text": response.text,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls],
        "usage": dict(response.usage.__dict__),
        "finish_reason": response.finish_reason,
    }


def response_from_json(data: dict[str, Any]) -> ModelResponse:
    """A journaled model response, rebuilt."""
    usage = {k: int(v) for k, v in (data.get("usage") or {}).items() if k in Usage.__dataclass_fields__}
    return ModelResponse(
        text=data.get("text") or "",
        tool_calls=[ToolCall(id=c["id"], name=c["name"], arguments=dict(c.get("arguments") or {}))
                    for c in data.get("tool_calls") or []],
        usage=Usage(**usage),
        finish_reason=data.get("finish_reason") or "complete",
    )


class Journal:
    """One run's journal: records as the run goes, and answers from a previous life while it
    replays (see the module docstring).

    ``entries`` are the journal lines of the run being resumed (None: a new run). ``scrub``
    redacts configured secrets from a line before it is written. ``on_live`` is called once, when
    the replay is over and the run's record should continue. ``on_write_error`` hears, once, that
    an entry did not reach the disk (the run goes on). ``writer``: the record writer (the
    process's own by default).
    """

    def __init__(
        self,
        store: RunStore,
        entries: list[dict[str, Any]] | None = None,
        *,
        scrub: Callable[[bytes], bytes] | None = None,
        on_live: Callable[[], None] | None = None,
        on_write_error: Callable[[str], None] | None = None,
        writer: RecordWriter | None = None,
    ) -> None:
        self.store = store
        self._writer = writer or record_writer()
        self._writer.on_failure(store, JOURNAL, lambda reason: engine_loop().call_soon(self._failed, reason))
        self._scrub = scrub
        self._on_live = on_live
        self._on_write_error = on_write_error
        self._write_failed = False
        self._models: list[dict[str, Any]] = []
        self._tools: dict[tuple[int, str], dict[str, Any]] = {}
        self._calls: dict[tuple[int, str], dict[str, Any]] = {}  # tool calls started (see record_call)
        self._fan_outs: dict[tuple[int, str], dict[str, Any]] = {}
        self._spent: dict[tuple[int, str], list[dict[str, Any]]] = {}
        self._seeds: dict[int, str] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        self._spawns: dict[tuple[int, str], dict[str, Any]] = {}
        self._children: dict[str, dict[str, Any]] = {}
        self._replaced: dict[str, str] = {}  # a paused sub-agent's id -> the one started again for it
        self._pos = 0
        self._seq = 0  # the number the next model call gets
        self.turn = -1  # the number of the last stage turn: its tool calls are keyed by it
        self.replayed_models = 0
        self.replayed_tools = 0
        self.live = True
        # Tell a provider that counts its answers (a script) of each call answered from here.
        self.tells_provider = False
        if entries:
            self._load(entries)

    # -- reading a previous life --------------------------------------------------------------
    def _load(self, entries: list[dict[str, Any]]) -> None:
        models: dict[int, dict[str, Any]] = {}
        for entry in entries:
            kind = entry.get("t")
            if kind == "rewind" and isinstance(entry.get("n"), int):
                self._drop_from(entry["n"], models)
            elif kind == "model" and isinstance(entry.get("n"), int):
                models[entry["n"]] = entry
            elif kind == "tool" and isinstance(entry.get("turn"), int):
                self._tools[(entry["turn"], str(entry.get("call_id")))] = entry
            elif kind == "call" and isinstance(entry.get("turn"), int):
                self._calls[(entry["turn"], str(entry.get("call_id")))] = entry
            elif kind == "fan_out" and isinstance(entry.get("turn"), int):
                self._fan_outs[(entry["turn"], str(entry.get("call_id")))] = entry
            elif kind == "spent" and isinstance(entry.get("turn"), int):
                key = (entry["turn"], str(entry.get("call_id")))
                self._spent.setdefault(key, []).extend(u for u in entry.get("usage") or [] if isinstance(u, dict))
            elif kind == "seed" and isinstance(entry.get("i"), int):
                self._seeds[entry["i"]] = str(entry.get("text") or "")
            elif kind == "answer" and isinstance(entry.get("turn"), int) and isinstance(entry.get("answer"), dict):
                self._answers[str(entry.get("id"))] = entry
            elif kind == "spawn" and isinstance(entry.get("turn"), int):
                self._spawns[(entry["turn"], str(entry.get("call_id")))] = entry
                if isinstance(entry.get("replaces"), str) and entry.get("child"):
                    self._replaced[entry["replaces"]] = str(entry["child"])
            elif kind == "child" and isinstance(entry.get("id"), str):
                self._children[entry["id"]] = entry
        ordered: list[dict[str, Any]] = []
        while len(ordered) in models:  # numbered from 0 without a gap; anything after a gap is lost
            ordered.append(models[len(ordered)])
        # What paused the run (credits, the network) is asked again, not replayed.
        while ordered and (ordered[-1].get("error") or {}).get("kind") in PAUSE_KINDS:
            ordered.pop()
        if len(ordered) < len(models):
            self._drop_from(len(ordered), models)
            self._write({"t": "rewind", "n": len(ordered)})
        self._models = ordered
        self.live = not (ordered or self._seeds)

    def _drop_from(self, n: int, models: dict[int, dict[str, Any]] | None = None) -> None:
        if models is not None:
            for key in [k for k in models if k >= n]:
                del models[key]
        self._tools = {k: v for k, v in self._tools.items() if k[0] < n}
        self._calls = {k: v for k, v in self._calls.items() if k[0] < n}
        self._fan_outs = {k: v for k, v in self._fan_outs.items() if k[0] < n}
        self._spent = {k: v for k, v in self._spent.items() if k[0] < n}
        self._answers = {k: v for k, v in self._answers.items() if v["turn"] < n}
        self._spawns = {k: v for k, v in self._spawns.items() if k[0] < n}

    @property
    def replaying(self) -> bool:
        """True while the run re-executes what its record already holds."""
        return not self.live

    @property
    def model_calls(self) -> int:
        """How many model calls the journal holds for replay."""
        return len(self._models)

    @property
    def tool_results(self) -> int:
        """How many tool results the journal holds for replay."""
        return len(self._tools)

    def go_live(self) -> None:
        """End the replay: from now on the run talks to the world and its record continues."""
        if self.live:
            return
        self.live = True
        if self._pos < len(self._models):  # journaled calls the run will not reach again
            self._write({"t": "rewind", "n": self._models[self._pos]["n"]})
            self._drop_from(self._models[self._pos]["n"])
        self._models = self._models[: self._pos]
        if self._on_live is not None:
            self._on_live()

    # -- model calls ----------------------------------------------------------------------------
    def replay_model(self, request: ModelRequest) -> ModelResponse | None:
        """The journaled outcome of this call while replaying (raises its ProviderError for a
        journaled failure), else None: the call must really be made."""
        if self.live:
            return None
        if self._pos >= len(self._models):
            self.go_live()
            return None
        entry = self._models[self._pos]
        if entry.get("purpose") != request.purpose or entry.get("stage") != request.stage:
            # The run no longer takes the path its record took (a changed blueprint or
            # configuration): what follows in the journal does not count any more.
            self._rewind(entry["n"])
            return None
        self._pos += 1
        self._seq = entry["n"] + 1
        self.replayed_models += 1
        # Accounting follows the model that answered then, whatever would be picked now.
        request.provider = str(entry.get("provider") or request.provider)
        request.model = str(entry.get("model") or request.model)
        error = entry.get("error")
        if error is not None:
            raise ProviderError(error.get("kind") or "api", error.get("message") or "")
        if request.purpose == "stage":
            self.turn = entry["n"]
        return response_from_json(entry.get("response") or {})

    def _rewind(self, n: int) -> None:
        self._seq = n
        self.go_live()  # writes the rewind from this entry on

    def record_model(self, request: ModelRequest, response: ModelResponse | None = None,
                     error: ProviderError | None = None) -> None:
        """Journal one model call's outcome (a response, or the error that ended the call)."""
        n = self._seq
        self._seq += 1
        entry: dict[str, Any] = {
            "t": "model", "n": n, "purpose": request.purpose, "stage": request.stage,
            "provider": request.provider, "model": request.model,
        }
        if response is not None:
            entry["response"] = response_json(response)
            if request.purpose == "stage":
                self.turn = n
        else:
            entry["error"] = {"kind": error.kind if error else "api", "message": error.message if error else ""}
        self._write(entry)

    # -- tool calls -----------------------------------------------------------------------------
    def replay_tool(self, call: ToolCall) -> dict[str, Any] | None:
        """The journaled result of a call of the current turn (it is not run again), else None."""
        entry = self._tools.get((self.turn, call.id))
        if entry is None:
            self.go_live()
            return None
        self.replayed_tools += 1
        return entry

    def record_tool(self, call_id: str, name: str, content: str, is_error: bool, modified_path: str | None,
                    *, changed: bool = False) -> None:
        """Journal one tool call's result, before the engine puts it into context (``changed``: the
        tool may have changed something, so the entry is on disk before the engine goes on)."""
        self._write({"t": "tool", "turn": self.turn, "call_id": call_id, "name": name, "content": content,
                     "is_error": is_error, "modified_path": modified_path}, through=changed)

    def record_call(self, call: ToolCall) -> None:
        """Journal that ``call`` of the current turn is about to run: on disk before it can change
        anything."""
        import time

        self._write({"t": "call", "turn": self.turn, "call_id": call.id, "name": call.name,
                     "arguments": call.arguments, "at": round(time.time(), 3)}, through=True)

    def interrupted(self, call: ToolCall) -> dict[str, Any] | None:
        """The journaled start of ``call`` of the current turn when a previous life started it and
        journaled no result (it was in flight when that process stopped), else None."""
        key = (self.turn, call.id)
        return self._calls.get(key) if key not in self._tools else None

    def replay_fan_out(self, call: ToolCall) -> list[dict[str, Any]] | None:
        """What the workers of this turn's fan_out brought back, if journaled."""
        entry = self._fan_outs.get((self.turn, call.id))
        if entry is None:
            self.go_live()
            return None
        return list(entry.get("workers") or [])

    def record_fan_out(self, call: ToolCall, workers: list[dict[str, Any]]) -> None:
        """Journal the workers' results of a fan_out call."""
        self._write({"t": "fan_out", "turn": self.turn, "call_id": call.id, "workers": workers}, through=True)

    def spent(self, call: ToolCall) -> list[dict[str, Any]]:
        """Usage totals of this turn's fan_out workers from tries that paused (run again live)."""
        return list(self._spent.get((self.turn, call.id), []))

    def record_spent(self, call: ToolCall, usages: list[dict[str, Any]]) -> None:
        """Journal what the workers of a fan_out that paused cost (its workers run again on resume)."""
        self._spent.setdefault((self.turn, call.id), []).extend(usages)
        self._write({"t": "spent", "turn": self.turn, "call_id": call.id, "usage": usages})

    def peek_tool(self, call: ToolCall) -> dict[str, Any] | None:
        """The journaled result of a call of the current turn, if any (the replay goes on either way)."""
        entry = self._tools.get((self.turn, call.id))
        if entry is not None:
            self.replayed_tools += 1
        return entry

    # -- a person's answers ---------------------------------------------------------------------
    def replay_answer(self, request_id: str) -> dict[str, Any] | None:
        """The journaled answer to request ``request_id`` (the person is not asked again), else None."""
        if self.live:
            return None
        entry = self._answers.get(request_id)
        if entry is None:
            self.go_live()
            return None
        return dict(entry["answer"])

    def answered(self, request_id: str) -> bool:
        """Whether the replay holds an answer to ``request_id`` (nothing else changes)."""
        return not self.live and request_id in self._answers

    def record_answer(self, request_id: str, answer: dict[str, Any], grant: list[Any] | None = None) -> None:
        """Journal a person's answer to ``request_id`` before the run acts on it (``grant``: the
        approval grant it gave, kept so a resumed run keeps it)."""
        entry = {"t": "answer", "turn": self.turn, "id": request_id, "answer": answer, "grant": grant}
        self._answers[request_id] = entry
        self._write(entry)

    def grants(self) -> list[list[Any]]:
        """The approval grants the journaled answers gave (``["run", tool]`` or ``["stage", stage,
        visit, tool]``), oldest first."""
        return [list(e["grant"]) for e in self._answers.values() if isinstance(e.get("grant"), list)]

    # -- sub-agents -----------------------------------------------------------------------------
    def spawned(self, call: ToolCall) -> str | None:
        """The id of the child this turn's ``spawn_agent`` call started in a previous life, if any."""
        entry = self._spawns.get((self.turn, call.id))
        return str(entry["child"]) if entry is not None and entry.get("child") else None

    def record_spawn(self, call_id: str, child_id: str, *, turn: int | None = None,
                     replaces: str | None = None) -> None:
        """Journal that ``spawn_agent`` (call ``call_id`` of this turn, or of ``turn``) starts the
        child ``child_id``; ``replaces``: the paused sub-agent it is started again for."""
        turn = self.turn if turn is None else turn
        entry: dict[str, Any] = {"t": "spawn", "turn": turn, "call_id": call_id, "child": child_id}
        if replaces is not None:
            entry["replaces"] = replaces
            self._replaced[replaces] = child_id
        self._spawns[(turn, call_id)] = entry
        self._write(entry, through=True)

    def replacement(self, child_id: str) -> str | None:
        """The sub-agent started again for ``child_id`` (which paused), if one was."""
        return self._replaced.get(child_id)

    def child(self, child_id: str) -> dict[str, Any] | None:
        """How the sub-agent ``child_id`` ended, if the journal says it did."""
        return self._children.get(child_id)

    def record_child(self, child_id: str, status: str, text: str, usage: dict[str, Any] | None) -> None:
        """Journal a sub-agent's end: its status, what wait_for_agent says of it, its cost."""
        entry = {"t": "child", "id": child_id, "status": status, "text": text, "usage": usage}
        self._children[child_id] = entry
        self._write(entry)

    # -- seeds ----------------------------------------------------------------------------------
    def replay_seed(self, index: int) -> str | None:
        """The journaled text of seed ``index``, else None."""
        text = self._seeds.get(index)
        if text is None:
            self.go_live()
        return text

    def record_seed(self, index: int, text: str) -> None:
        """Journal the text seed ``index`` produced."""
        self._write({"t": "seed", "i": index, "text": text})

    # -- writing --------------------------------------------------------------------------------
    def _write(self, entry: dict[str, Any], *, through: bool = False) -> None:
        """Queue ``entry`` (``through``: write it, and what was queued before it, now)."""
        line = encode_line(entry)
        if self._scrub is not None:
            line = self._scrub(line)
        if not through:
            self._writer.append(self.store, JOURNAL, line)
            return
        try:
            self._writer.write_through(self.store, JOURNAL, line)
        except OSError as exc:
            self._failed(str(exc.strerror or exc))

    def _failed(self, reason: str) -> None:
        """An entry did not reach the disk: the run goes on; say once what a resume may then do."""
        if not self._write_failed and self._on_write_error is not None:
            self._write_failed = True
            self._on_write_error(f"the run's journal could not be written ({reason}); "
                                 "resuming this run may repeat model and tool calls")

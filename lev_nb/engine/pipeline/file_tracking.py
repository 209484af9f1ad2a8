"""``[context.file_tracking]``: the files a run reads and writes, kept in a hashmap region.

After each batch, every successful ``read_file`` (``track_reads``) and ``write_file`` /
``edit_file`` (``track_writes``) puts the file's text into the tracking region under its path,
replacing what an earlier call stored there, so a later stage knows what has been looked at and
what it said. One file's text is cut to ``max_file_tokens`` (a note says so). A region that is not
there, or not a hashmap, gets one warning and no entries.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from lev_nb.text import cut_text_marked
from lev_nb.workspace import Workspace, WorkspaceError

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState
    from lev_nb.messages import ToolCall
    from lev_nb.tools.executor import ToolResult

READS = frozenset({"read_file"})
WRITES = frozenset({"write_file", "edit_file"})
TOKEN_BYTES = 4  # the runtime's token estimate: 4 UTF-8 bytes a token (lev_nb.text.estimate_tokens)


class FileTracker:
    """Mirrors the run's file reads and writes into its tracking region (see the module docstring)."""

    def __init__(self, state: RunState, context_tools: Any, workspace: Workspace) -> None:
        self.state = state
        self.context_tools = context_tools
        self.workspace = workspace
        self.config = state.plan.file_tracking
        self._warned = False

    async def track(self, calls: list[ToolCall], results: list[ToolResult], canonical: Any) -> None:
        """Put what this batch's successful file calls read or wrote into the region."""
        config = self.config
        if config is None:
            return
        by_id = {call.id: call for call in calls}
        for result in results:
            tool = canonical(result.name)
            wanted = (tool in READS and config.track_reads) or (tool in WRITES and config.track_writes)
            call = by_id.get(result.call_id)
            if not wanted or result.is_error or call is None:
                continue
            path = (call.arguments or {}).get("path")
            if not isinstance(path, str):
                continue
            text = result.content if tool in READS else self._current_text(path)
            if text is None:
                continue
            await self._store(path, text)

    def _current_text(self, path: str) -> str | None:
        """The file's text after a write (None when it cannot be read)."""
        try:
            return self.workspace.resolve(path).read_text(encoding="utf-8", errors="replace")
        except (OSError, WorkspaceError):
            return None

    async def _store(self, path: str, text: str) -> None:
        config = self.config
        assert config is not None
        ctx = self.state.ctx
        if not ctx.has_region(config.region) or ctx.region(config.region).kind != "hashmap":
            if not self._warned:
                self._warned = True
                self.state.warn(f"[context.file_tracking] names region '{config.region}', which is not a hashmap "
                                "region of this agent, so no file is tracked; declare it with kind = \"hashmap\"")
            return
        if config.max_file_tokens:
            text, cut = cut_text_marked(text, config.max_file_tokens * TOKEN_BYTES)
            if cut:
                text += f"\n[tracked up to {config.max_file_tokens} tokens; the file is longer]"
        answer = self.context_tools.write(config.region, text, key=path)
        if inspect.isawaitable(answer):
            await answer

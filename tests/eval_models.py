"""Picklable models for evaluation tests (worker processes import them by module name)."""

from __future__ import annotations

import re
from typing import Any

_SAY = re.compile(r"say: ([^\n]*)")


class EchoModel:
    """Answers as the ``mock`` model does, except that the final output is what the task asks it to
    say (``say: <text>``), so each case of a dataset gets its own answer."""

    name = "echo"

    async def complete(self, request: Any) -> Any:
        import dataclasses

        from lev_nb.messages import request_text
        from lev_nb.providers import MockModel

        response = await MockModel().complete(request)
        found = _SAY.search(request_text(request))
        if not found:
            return response
        calls = [dataclasses.replace(c, arguments={**c.arguments, "content": found.group(1)})
                 if c.name == "submit_output" else c for c in response.tool_calls]
        return dataclasses.replace(response, tool_calls=calls)

"""JSON Schema validators, compiled once: for tool arguments, script tools and final outputs.

``jsonschema`` is imported on first use, not with lev_nb: with the optional format checkers installed
(JupyterLab brings them) its import takes about a second, which would otherwise land on the first
``bp.run`` of a notebook. :func:`warm_up` starts that import in the background.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from typing import Any

__all__ = ["compile_schema", "warm_up"]


def compile_schema(schema: dict[str, Any]) -> tuple[Any | None, str | None]:
    """``(validator, None)`` for a usable schema; ``(None, why)`` when the schema itself is broken."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        return None, f"it cannot be written as JSON ({exc})"
    return _compiled(key)


@lru_cache(maxsize=512)
def _compiled(schema_json: str) -> tuple[Any | None, str | None]:
    import jsonschema

    schema = json.loads(schema_json)
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return None, exc.message
    return cls(schema), None


def warm_up() -> None:
    """Import jsonschema on a background thread, so the first check does not wait for it."""
    threading.Thread(target=_import, name="lev-warm-up", daemon=True).start()


def _import() -> None:
    try:
        import jsonschema  # noqa: F401
    except Exception:  # nothing to warm: the first check reports the problem itself
        pass

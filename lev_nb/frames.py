"""Tables as pandas DataFrames, where pandas is optional: the one place lev_nb imports it.

``run.events.to_pandas()`` and ``lev_nb.runs().to_pandas()`` build their frames here, so a
missing pandas is told the same way everywhere: one line saying how to install it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["data_frame", "PandasMissing"]


class PandasMissing(ImportError):
    """pandas is not installed; the message says how to get it."""


def data_frame(rows: Iterable[dict[str, Any]], columns: Sequence[str] | None = None) -> Any:
    """``rows`` (one dict a row) as a ``pandas.DataFrame`` with ``columns`` in that order (every
    key seen, in first-seen order, when None). Raises :class:`PandasMissing` without pandas."""
    try:
        import pandas
    except ImportError:
        raise PandasMissing(
            "to_pandas() needs pandas, which is not installed: pip install pandas "
            "(the rows are also a plain list: list(...) or iterate over them)"
        ) from None
    return pandas.DataFrame.from_records(list(rows), columns=list(columns) if columns is not None else None)

"""The run story's sentences, under the name notebooks have imported them by: they live in
:mod:`lev_nb.explain.story`, below both the notebook and the command line."""

from __future__ import annotations

from lev_nb.explain.story import Line, clip, first_line, format_bytes, format_count, plural, sentence

__all__ = ["Line", "sentence", "first_line", "clip", "format_count", "format_bytes", "plural"]

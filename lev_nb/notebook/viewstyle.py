"""How the run view looks, as inline styles only, so it reads the same in every viewer.

JupyterLab does not trust a notebook it did not run and strips its ``<style>`` blocks and
``data-*`` attributes; GitHub and nbviewer strip them too, and JupyterLab's sanitizer keeps only
inline ``style`` attributes whose values are plain CSS (no ``var(--jp-…)``). So the view's markup
carries classes that say what each part is, and :func:`inline` gives each element the style of
its classes from :data:`RULES`. Colours are theme-neutral: text inherits the page's colour,
secondary text is translucent, borders and shading are translucent grey, and the accents are
mid-tone colours that read on a light and a dark background alike.
"""

from __future__ import annotations

import re

__all__ = ["RULES", "inline", "BORDER", "SHADE", "ACCENT", "SUCCESS", "ERROR", "WARN", "INFO"]

BORDER = "rgba(128,128,128,.45)"
SHADE = "rgba(128,128,128,.12)"
ACCENT = "#1e88e5"
SUCCESS = "#43a047"
ERROR = "#e53935"
WARN = "#f57c00"
INFO = "#00acc1"
DIM = "opacity:.75"
MONO = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace"

# (classes an element must all have, its style); an element gets every rule it matches, in order.
RULES: list[tuple[frozenset[str], str]] = [
    (frozenset(c.split()), style) for c, style in (
        ("lev-run", "font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;font-size:13px;line-height:1.45;"
                    "text-align:left;max-width:64em"),
        ("lev-head", "display:flex;flex-wrap:wrap;align-items:center;gap:.25em .6em"),
        ("lev-agent", "font-weight:600;font-size:1.1em"),
        ("lev-id", f"{MONO};font-size:.9em;{DIM}"),
        ("lev-chip", "display:inline-block;border-radius:1em;padding:0 .65em;font-size:.85em;font-weight:600;color:#fff"),
        ("lev-title", "margin:.2em 0;font-weight:600"),
        ("lev-task", "margin:.2em 0"),
        ("lev-more-lines", f"{DIM};font-size:.9em"),
        ("lev-facts", "display:flex;flex-wrap:wrap;gap:.1em 1.2em;font-size:.92em"),
        ("lev-fact", f"{DIM}"),
        ("lev-bar", f"height:6px;border-radius:3px;margin:.45em 0;background-color:{SHADE};overflow:hidden"),
        ("lev-fill", f"display:block;height:100%;background-color:{ACCENT}"),
        ("lev-fill complete", f"background-color:{SUCCESS}"),
        ("lev-fill error", f"background-color:{ERROR}"),
        ("lev-fill cancelled", f"background-color:{ERROR}"),
        ("lev-stages", "display:flex;flex-wrap:wrap;gap:.3em;margin:.2em 0 .3em"),
        ("lev-stage", f"border:1px solid {BORDER};border-radius:.3em;padding:0 .45em;font-size:.92em;{DIM}"),
        ("lev-stage visited", f"opacity:1;background-color:{SHADE}"),
        ("lev-stage current", f"opacity:1;font-weight:600;border-color:{ACCENT};box-shadow:0 0 0 1px {ACCENT}"),
        ("lev-stage current complete", f"border-color:{SUCCESS};box-shadow:0 0 0 1px {SUCCESS}"),
        ("lev-stage current error", f"border-color:{ERROR};box-shadow:0 0 0 1px {ERROR}"),
        ("lev-stage current cancelled", f"border-color:{ERROR};box-shadow:0 0 0 1px {ERROR}"),
        ("lev-visit", f"margin:.5em 0 0;padding-left:.6em;border-left:2px solid {BORDER}"),
        ("lev-visit current", f"border-left-color:{ACCENT}"),
        ("lev-visit-head", "font-weight:600"),
        ("lev-dim", f"font-weight:normal;{DIM}"),
        ("lev-lines", "list-style:none;margin:.15em 0;padding:0"),
        ("lev-line", "margin:.1em 0"),
        ("lev-callout", f"border-left:3px solid {WARN};padding:0 .45em;background-color:{SHADE}"),
        ("lev-callout error", f"border-left-color:{ERROR}"),
        ("lev-callout rejected", f"border-left-color:{ERROR}"),
        ("lev-callout denied", f"border-left-color:{ERROR}"),
        ("lev-callout nudge", f"border-left-color:{INFO}"),
        ("lev-callout ask", f"border-left-color:{ACCENT}"),
        ("lev-callout answer", f"border-left-color:{SUCCESS}"),
        ("lev-tag", f"font-size:.78em;font-weight:700;letter-spacing:.04em;text-transform:uppercase;margin-right:.45em;{DIM}"),
        ("lev-details", "margin:.15em 0"),
        ("lev-summary", f"cursor:pointer;{DIM}"),
        ("lev-entries", "margin:.2em 0;padding-left:1.6em"),
        ("lev-said", f"{MONO};font-size:.88em;white-space:pre-wrap;margin:.05em 0 0"),
        ("lev-output", f"margin-top:.7em;border:1px solid {BORDER};border-radius:4px;padding:.4em .7em"),
        ("lev-output-head", "font-weight:600;margin-bottom:.3em"),
        ("lev-pre", f"white-space:pre-wrap;margin:0;max-height:28em;overflow:auto;{MONO};font-size:.9em"),
        ("lev-table", "border-collapse:collapse;font-size:.92em"),
        ("lev-cell", f"border:1px solid {BORDER};padding:.15em .5em;text-align:left"),
        ("lev-error", f"margin-top:.7em;border-left:4px solid {ERROR};padding:.3em .7em;background-color:{SHADE}"),
        ("lev-forming", f"margin-top:.5em;padding:.3em .7em;white-space:pre-wrap;border-left:4px solid {ACCENT}"),
        ("lev-label", "font-weight:600;text-transform:uppercase;font-size:.8em"),
        ("lev-children", "margin-top:.6em"),
        ("lev-children-head", "font-weight:600"),
        ("lev-child", "display:flex;flex-wrap:wrap;align-items:center;gap:.2em .6em;margin:.15em 0"),
        ("lev-child-chip", "font-size:.78em"),
        ("lev-mcp", "margin:.2em 0"),
    )
]

_CLASSED = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)([^<>]*?)\sclass='([^']*)'([^<>]*)>")


def style_of(classes: set[str]) -> str:
    """The inline style for an element with ``classes``: every matching rule, in order."""
    return ";".join(style for needed, style in RULES if needed <= classes)


def inline(markup: str) -> str:
    """``markup`` with each classed element's style written into its ``style`` attribute (before
    any style it had, which wins: a status chip keeps its own colour)."""

    def one(match: re.Match[str]) -> str:
        tag, before, classes, after = match.groups()
        style = style_of(set(classes.split()))
        if not style:
            return match.group(0)
        rest = before + after
        own = re.search(r"\sstyle='([^']*)'", rest)
        if own:
            rest = rest[: own.start()] + rest[own.end():]
            style = f"{style};{own.group(1)}"
        return f"<{tag}{rest} class='{classes}' style='{style}'>"

    return _CLASSED.sub(one, markup)

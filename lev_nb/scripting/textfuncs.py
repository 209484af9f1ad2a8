"""The pure host functions a tool script gets besides its I/O: ``encode_uri`` and ``html_to_text``.

They only transform values the script already has, so they need no permission (unlike
``http_get`` or ``shell``, :mod:`lev_nb.scripting.host`).
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["encode_uri", "html_to_text"]

# Elements whose content is never prose a reader sees.
_HIDDEN = ("script", "style", "noscript", "template", "svg", "head", "iframe", "object")
# Elements that end a line of text.
_BLOCKS = frozenset({
    "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer", "nav",
    "aside", "main", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "dd", "dt", "dl", "hr",
    "figure", "figcaption", "form", "title", "td", "th",
})


def encode_uri(value: object) -> str:
    """``value`` percent-encoded for one part of a URL (a query value or a path segment), as
    JavaScript's ``encodeURIComponent`` does."""
    if not isinstance(value, str):
        raise TypeError("encode_uri: the value must be a string")
    return urllib.parse.quote(value, safe="-_.!~*'()")


def html_to_text(html: object) -> str:
    """The readable text of an HTML document: scripts, styles and markup dropped, one line per
    block element, runs of blank lines and spaces collapsed."""
    if not isinstance(html, str):
        raise TypeError("html_to_text: the HTML must be a string")
    if not html.strip():
        return ""
    from lxml import etree
    from lxml import html as lxml_html

    try:
        root = lxml_html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return re.sub(r"\s+", " ", html).strip()
    etree.strip_elements(root, *_HIDDEN, etree.Comment, with_tail=False)
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag.lower() in _BLOCKS:
            element.tail = "\n" + (element.tail or "")
    text = root.text_content()
    lines = [re.sub(r"[ \t\r\f\v\u00a0]+", " ", line).strip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()

"""How the Mermaid diagrams JupyterLab drew look on the page, for the browser tests: the contrast of
every edge line, arrowhead, edge label, node label and title against what lies behind it, and where
each node sits.

JupyterLab draws a diagram into an ``<img>`` (an SVG data URL), whose insides the page's
``getComputedStyle`` cannot reach; :data:`MEASURE_JS` puts a copy of that SVG into the page, in a
box that inherits nothing (as inside the image), reads the computed colours there, composites
each colour with its opacity over what is behind it (the label's chip, the node's fill, or the
page behind the image as the current theme paints it) and gives WCAG contrast ratios.
"""

from __future__ import annotations

from typing import Any

# Per diagram: {page: "r,g,b", lines|arrows|labels|nodes|title: [[ratio, what], ...] lowest first,
# at: {node id: [x, y]}}.
MEASURE_JS = r"""() => {
  const parse = c => { const m = (c || '').match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (fg, bg) => [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3])).concat([1]);
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const backdrop = (el, base, stop) => { const chain = []; for (let e = el; e && e !== stop; e = e.parentElement) chain.unshift(e);
    let bg = base; for (const e of chain) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c[3] > 0) bg = over(c, bg); } return bg; };
  const paint = (el, prop) => { const s = getComputedStyle(el); const c = parse(s[prop]); if (!c) return null;
    const op = Number(s.opacity) * Number(prop === 'fill' ? s.fillOpacity : prop === 'stroke' ? s.strokeOpacity : 1);
    return [c[0], c[1], c[2], c[3] * op]; };
  const out = [];
  document.querySelectorAll('.jp-RenderedMermaid img').forEach(img => {
    const page = backdrop(img, [255, 255, 255, 1]);
    const text = decodeURIComponent(img.src.split(',')[1]);
    const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
    const box = document.createElement('div'); box.style.all = 'initial'; box.style.position = 'fixed'; box.style.left = '-5000px';
    document.body.appendChild(box); const el = box.appendChild(document.importNode(svg, true));
    const r = {page: page.slice(0, 3).map(Math.round).join(','), lines: [], arrows: [], labels: [], nodes: [], title: [], at: {}};
    const add = (arr, fg, bg, what) => { if (fg && fg[3] > 0) arr.push([Math.round(ratio(over(fg, bg), bg) * 100) / 100, what]); };
    el.querySelectorAll('path.flowchart-link').forEach(p => { if (getComputedStyle(p).display === 'none' || p.getAttribute('style')?.includes('stroke-width:0')) return; add(r.lines, paint(p, 'stroke'), page, p.id); });
    el.querySelectorAll('marker path').forEach(p => add(r.arrows, paint(p, 'fill'), page, p.parentElement.id));
    el.querySelectorAll('g.edgeLabel').forEach(g => {
      const t = [...g.querySelectorAll('p, span, text, tspan')].filter(e => e.textContent.trim() && ![...e.children].some(c => c.textContent.trim()));
      t.forEach(e => { let bg = page; const rect = g.querySelector('rect'); const rf = rect && paint(rect, 'fill'); if (rf && rf[3] > 0 && rect.getBBox().width > 0) bg = over(rf, bg);
        bg = backdrop(e, bg, box);
        add(r.labels, parse(getComputedStyle(e).color) || paint(e, 'fill'), bg, e.textContent.trim().slice(0, 20)); });
    });
    el.querySelectorAll('g.node').forEach(g => {
      let bg = page; const shape = [...g.querySelectorAll(':scope > rect, :scope > polygon, :scope > circle, :scope > path, :scope > ellipse, :scope > g > path, :scope > g > circle')].find(s => (paint(s, 'fill') || [0, 0, 0, 0])[3] > 0);
      if (shape) bg = over(paint(shape, 'fill'), bg);
      [...g.querySelectorAll('p, span, text, tspan')].filter(e => e.textContent.trim() && ![...e.children].some(c => c.textContent.trim()))
        .forEach(e => add(r.nodes, parse(getComputedStyle(e).color), backdrop(e, bg, box), e.textContent.trim().slice(0, 20)));
    });
    el.querySelectorAll('.flowchartTitleText').forEach(t => add(r.title, paint(t, 'fill'), page, t.textContent));
    el.querySelectorAll('g.node').forEach(g => {
      const m = (g.getAttribute('transform') || '').match(/translate\(([-\d.e]+),\s*([-\d.e]+)\)/);
      const id = (g.id.match(/flowchart-(.+)-\d+$/) || [])[1];
      if (m && id) r.at[id] = [Number(m[1]), Number(m[2])];
    });
    for (const k of ['lines', 'arrows', 'labels', 'nodes', 'title']) r[k].sort((a, b) => a[0] - b[0]);
    box.remove(); out.push(r);
  });
  return out;
}
"""

# WCAG: 3:1 for lines and arrowheads (graphical objects), 4.5:1 for text. The title is the one text
# drawn on the page itself, in bold: no colour reaches 4.5:1 on both white and JupyterLab Dark's
# #111111, so the grey it shares with the lines (4.2:1 and 4.5:1) is the bar.
MIN_RATIO = {"lines": 3.0, "arrows": 3.0, "labels": 4.5, "nodes": 4.5, "title": 4.2}


def measure_diagrams(page: Any) -> list[dict[str, Any]]:
    """:data:`MEASURE_JS` run on the page: one entry per drawn Mermaid diagram, in page order."""
    return list(page.evaluate(MEASURE_JS))


def unreadable(diagrams: list[dict[str, Any]]) -> list[str]:
    """Every part of the diagrams below its bar in :data:`MIN_RATIO`, said in words."""
    found = []
    for index, diagram in enumerate(diagrams):
        for part, bar in MIN_RATIO.items():
            for ratio, what in diagram[part]:
                if ratio < bar:
                    found.append(f"diagram {index}: {part} {what!r} at {ratio}:1 on rgb({diagram['page']}) (needs {bar}:1)")
    return found


def out_of_order(diagrams: list[dict[str, Any]], directions: list[str]) -> list[str]:
    """Diagrams whose ``start`` node is not first, or whose ``done`` node is not last, along the
    direction they are drawn in (TB: top to bottom, LR: left to right); the note of cut hints is
    left out."""
    found = []
    for index, (diagram, direction) in enumerate(zip(diagrams, directions)):
        axis = 1 if direction in ("TB", "TD") else 0
        along = {node: xy[axis] for node, xy in diagram["at"].items() if node != "lev_hints"}
        if "lev_start" not in along:
            continue
        others = [v for node, v in along.items() if node not in ("lev_start", "lev_done")]
        if others and along["lev_start"] >= min(others):
            found.append(f"diagram {index}: start is not first ({direction}): {along}")
        if others and "lev_done" in along and along["lev_done"] <= max(others):
            found.append(f"diagram {index}: done is not last ({direction}): {along}")
    return found

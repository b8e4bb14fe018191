"""The dossier's charts as inline SVG drawn here (no plotting library, no script, no network at view time).

Vector graphics print sharply to PDF and keep the HTML one self-contained file (issue 34 §1). Four charts: ε per
step (horizontal bars that add up to the total, docs/DESIGN.md §2); and, in the internal edition only, downstream
accuracy with its bootstrap intervals (synthetic vs real, docs/DESIGN.md §5), the overlay of real and synthetic
documents' embeddings in two dimensions (t-SNE / UMAP, docs/DESIGN.md §5) and the disclosure test's matched
training vs held-out documents ([Phantoms]).
"""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

WIDTH = 640
_BAR = 26
_LEFT = 250
_COLOURS = ("#2f6f9f", "#c0792a", "#5b8c4a", "#8a5aa6", "#a23b3b", "#4f8f8f")


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12, weight: str = "normal",
          fill: str = "#222") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" text-anchor="{anchor}" '
            f'fill="{fill}">{escape(text)}</text>')


def _svg(height: float, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" width="{WIDTH}" '
            f'height="{height:.0f}" viewBox="0 0 {WIDTH} {height:.0f}" font-family="Helvetica, Arial, sans-serif">'
            f'<title>{escape(title)}</title>' + "".join(body) + "</svg>")


def epsilon_chart(steps: Sequence[dict[str, Any]], total: float) -> str:
    """ε per step as bars on one scale, each with its value, and the total (pure ε-DP adds up, docs/DESIGN.md §2)."""
    if not steps or total <= 0:
        return _svg(40, [_text(10, 24, "No DP release was recorded.")], "ε per step")
    scale = (WIDTH - _LEFT - 70) / max(total, max(float(s["epsilon"]) for s in steps))
    body: list[str] = []
    y = 10.0
    for i, step in enumerate(steps):
        eps = float(step["epsilon"])
        body.append(_text(_LEFT - 8, y + _BAR * 0.68, str(step["label"]), anchor="end"))
        body.append(f'<rect x="{_LEFT}" y="{y:.1f}" width="{max(eps * scale, 1):.1f}" height="{_BAR}" '
                    f'fill="{_COLOURS[i % len(_COLOURS)]}"/>')
        body.append(_text(_LEFT + eps * scale + 6, y + _BAR * 0.68, f"ε = {eps:.4g}"))
        y += _BAR + 8
    body.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + total * scale:.1f}" y2="{y:.1f}" stroke="#222" '
                'stroke-width="2"/>')
    body.append(_text(_LEFT - 8, y + 16, "Total (sequential composition)", anchor="end", weight="bold"))
    body.append(_text(_LEFT + total * scale + 6, y + 16, f"ε = {total:.4g}", weight="bold"))
    return _svg(y + 28, body, "ε per step")


def accuracy_chart(rows: Sequence[dict[str, Any]], *, chance: float | None) -> str:
    """Accuracy per classifier (dot = mean over seeds) with its bootstrap interval over the test documents
    (whisker), on a 0–1 scale, the majority-class rate as a dashed line."""
    rows = [r for r in rows if r.get("mean") is not None]
    if not rows:
        return _svg(40, [_text(10, 24, "No accuracy was recorded.")], "Accuracy")
    span = WIDTH - _LEFT - 40

    def x(v: float) -> float:
        return _LEFT + max(0.0, min(1.0, v)) * span

    body: list[str] = []
    y = 14.0
    for i, r in enumerate(rows):
        mid = y + _BAR / 2
        colour = _COLOURS[0] if r.get("dp") else _COLOURS[1]
        body.append(_text(_LEFT - 8, mid + 4, str(r.get("short") or r["label"]), anchor="end", size=11))
        if r.get("low") is not None and r.get("high") is not None:
            body.append(f'<line x1="{x(r["low"]):.1f}" y1="{mid:.1f}" x2="{x(r["high"]):.1f}" y2="{mid:.1f}" '
                        f'stroke="{colour}" stroke-width="3"/>')
            for v in (r["low"], r["high"]):
                body.append(f'<line x1="{x(v):.1f}" y1="{mid - 6:.1f}" x2="{x(v):.1f}" y2="{mid + 6:.1f}" '
                            f'stroke="{colour}" stroke-width="2"/>')
        body.append(f'<circle cx="{x(r["mean"]):.1f}" cy="{mid:.1f}" r="5" fill="{colour}"/>')
        y += _BAR + 6
    axis = y + 4
    body.append(f'<line x1="{_LEFT}" y1="{axis:.1f}" x2="{_LEFT + span}" y2="{axis:.1f}" stroke="#555"/>')
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        body.append(f'<line x1="{x(tick):.1f}" y1="{axis:.1f}" x2="{x(tick):.1f}" y2="{axis + 5:.1f}" stroke="#555"/>')
        body.append(_text(x(tick), axis + 18, f"{tick:.2f}", anchor="middle", size=10))
    if chance is not None:
        body.append(f'<line x1="{x(chance):.1f}" y1="6" x2="{x(chance):.1f}" y2="{axis:.1f}" stroke="#999" '
                    'stroke-dasharray="4 3"/>')
        body.append(_text(x(chance) + 4, axis - 4, f"majority class {chance:.2f}", size=10, fill="#666"))
    legend = axis + 40
    keys = ((_COLOURS[0], "trained on DP outputs"), (_COLOURS[1], "trained on real data"))
    for k, (colour, words) in enumerate(keys):
        body.append(f'<circle cx="{_LEFT + 8 + 190 * k}" cy="{legend - 4}" r="5" fill="{colour}"/>')
        body.append(_text(_LEFT + 18 + 190 * k, legend, words, size=11))
    return _svg(legend + 10, body, "Accuracy, synthetic vs real, with 95 % intervals")


def overlay_chart(points: Sequence[dict[str, Any]], *, method: str) -> str:
    """The overlay: real test documents (hollow grey rings) and synthetic documents (filled dots, one colour per
    class) at their 2-D projection (PRIVATE: the real points are private documents' positions)."""
    pts = [p for p in points if p.get("x") is not None and p.get("y") is not None]
    if not pts:
        return _svg(40, [_text(10, 24, "No projection was recorded.")], "Overlay")
    side, pad, top = 420.0, 14.0, 8.0
    xs, ys = [float(p["x"]) for p in pts], [float(p["y"]) for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = (side - 2 * pad) / ((x1 - x0) or 1.0)
    sy = (side - 2 * pad) / ((y1 - y0) or 1.0)
    left = (WIDTH - side) / 2 - 60
    classes = sorted({str(p["label"]) for p in pts if p["source"] == "synthetic"})
    colour = {c: _COLOURS[i % len(_COLOURS)] for i, c in enumerate(classes)}
    body = [f'<rect x="{left:.1f}" y="{top:.1f}" width="{side:.0f}" height="{side:.0f}" fill="#fcfcfc" '
            'stroke="#bbb"/>']
    for p in sorted(pts, key=lambda q: q["source"] != "real"):  # synthetic drawn over real
        cx = left + pad + (float(p["x"]) - x0) * sx
        cy = top + side - pad - (float(p["y"]) - y0) * sy
        if p["source"] == "real":
            body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.2" fill="none" stroke="#8c8c8c" '
                        'stroke-width="1"/>')
        else:
            body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{colour[str(p["label"])]}" '
                        'fill-opacity="0.85"/>')
    lx, ly = left + side + 16, top + 14
    body.append(f'<circle cx="{lx:.1f}" cy="{ly - 4:.1f}" r="4" fill="none" stroke="#8c8c8c"/>')
    body.append(_text(lx + 10, ly, "real test document", size=11))
    for i, c in enumerate(classes[:12]):
        y = ly + 20 * (i + 1)
        body.append(f'<circle cx="{lx:.1f}" cy="{y - 4:.1f}" r="4" fill="{colour[c]}"/>')
        body.append(_text(lx + 10, y, f"synthetic: {c}"[:30], size=11))
    body.append(_text(left, top + side + 18, f"{method.upper()} of sentence embeddings; axes have no units.",
                      size=10, fill="#666"))
    return _svg(top + side + 26, body, "Overlay of real and synthetic documents")


def disclosure_chart(train: int, holdout: int, per_part: int) -> str:
    """Matched training vs held-out documents of the disclosure test, as two bars on one scale (the held-out bar
    is what chance alone gives, [Phantoms])."""
    if per_part <= 0:
        return _svg(40, [_text(10, 24, "No disclosure test was recorded.")], "Disclosure test")
    top = max(train, holdout, 1)
    scale = (WIDTH - _LEFT - 120) / top
    body: list[str] = []
    for i, (name, value, colour) in enumerate((("Training documents matched", train, _COLOURS[4]),
                                                ("Held-out documents matched (chance)", holdout, "#8c8c8c"))):
        y = 10 + i * (_BAR + 8)
        body.append(_text(_LEFT - 8, y + _BAR * 0.68, name, anchor="end", size=11))
        body.append(f'<rect x="{_LEFT}" y="{y:.1f}" width="{max(value * scale, 1):.1f}" height="{_BAR}" '
                    f'fill="{colour}"/>')
        body.append(_text(_LEFT + value * scale + 6, y + _BAR * 0.68, f"{value} of {per_part}", size=11))
    return _svg(10 + 2 * (_BAR + 8) + 6, body, "Disclosure test: matched training vs held-out documents")

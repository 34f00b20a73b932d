"""The report's document model: :class:`Block`, its Markdown and self-contained HTML rendering, and the one
number format of the report."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lit_sb3.zoo import plots, stats


@dataclass
class Block:
    """One element of the document, rendered to both markdown and HTML.

    Args:
        kind: ``h1``, ``h2``, ``h3``, ``p``, ``warn``, ``ul``, ``links``, ``code``, ``table`` or ``fig``.
        text: heading/paragraph/code text, or figure caption.
        items: list items, table rows, or ``(text, url)`` links.
        headers: table headers.
        path: figure file, relative to the report folder.
    """

    kind: str
    text: str = ""
    items: list[Any] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    path: str = ""


def _fmt(x: float | None) -> str:
    """The one number format of the report: 3 decimals (scores, CIs, probabilities, seconds), — for none."""
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "—"
    return f"{float(x):.3f}"


def _int(n: float | None) -> str:
    """Counts and env steps: integers with thousands separators."""
    if n is None or (isinstance(n, float) and not np.isfinite(n)):
        return "—"
    return f"{int(round(n)):,}"


def _ci(iv: stats.Interval) -> str:
    return f"{_fmt(iv.point)} [{_fmt(iv.low)}, {_fmt(iv.high)}]"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _steps(values: list[float]) -> str:
    """One env-step count, or the range when runs differ."""
    finite = sorted({int(v) for v in values if np.isfinite(v)})
    if not finite:
        return "—"
    return _int(finite[0]) if len(finite) == 1 else f"{_int(finite[0])}–{_int(finite[-1])}"


def _md(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b.kind == "h1":
            out.append(f"# {b.text}\n")
        elif b.kind == "h2":
            out.append(f"## {b.text}\n")
        elif b.kind == "h3":
            out.append(f"### {b.text}\n")
        elif b.kind == "warn":
            out.append(f"> **Warning:** {b.text}\n")
        elif b.kind == "p":
            out.append(b.text + "\n")
        elif b.kind == "ul":
            out.append("\n".join(f"- {i}" for i in b.items) + "\n")
        elif b.kind == "links":
            out.append("\n".join(f"- [{text}]({url})" for text, url in b.items) + "\n")
        elif b.kind == "code":
            out.append(f"```\n{b.text}\n```\n")
        elif b.kind == "table":
            rows = [b.headers, ["---"] * len(b.headers), *b.items]
            out.append("\n".join("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows) + "\n")
        elif b.kind == "fig":
            out.append(f"![{b.text}]({b.path})\n")
    return "\n".join(out)


def _html(blocks: list[Block], title: str, folder: Path) -> str:
    e = html.escape
    body = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3", "p"):
            tag = b.kind
            body.append(f"<{tag}>{e(b.text)}</{tag}>")
        elif b.kind == "warn":
            body.append(f'<div class="warn"><strong>Warning:</strong> {e(b.text)}</div>')
        elif b.kind == "links":
            items = "".join(f'<li><a href="{e(url)}">{e(text)}</a></li>' for text, url in b.items)
            body.append(f"<ul>{items}</ul>")
        elif b.kind == "ul":
            body.append("<ul>" + "".join(f"<li>{e(str(i))}</li>" for i in b.items) + "</ul>")
        elif b.kind == "code":
            body.append(f"<pre><code>{e(b.text)}</code></pre>")
        elif b.kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in b.items)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif b.kind == "fig":
            raw = (folder / b.path).read_bytes()
            data = base64.b64encode(raw).decode("ascii")
            # shown at 100 CSS px per inch of figure (the PNG has plots.DPI pixels per inch): sharp, not oversized
            width = int.from_bytes(raw[16:20], "big") * 100 // plots.DPI
            body.append(
                f'<figure><img src="data:image/png;base64,{data}" width="{width}" alt="{e(b.text)}" '
                f'data-file="{e(b.path)}">'
                f'<figcaption>{e(b.text)} (<a href="{e(b.path)}">PNG</a>, '
                f'<a href="{e(str(Path(b.path).with_suffix(".svg")))}">SVG</a>)</figcaption></figure>'
            )
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left}th{background:#f3f3f3}pre{background:#f6f6f6;padding:0.8em;overflow-x:auto}"
        "img{max-width:100%;height:auto}figure{margin:1em 0}figcaption{font-size:0.85em;color:#555}"
        ".warn{background:#fff4e5;border-left:6px solid #e67e00;padding:0.8em 1em;margin:1em 0;font-size:1.05em}"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )

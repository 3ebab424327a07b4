"""The self-contained HTML page every report writes: one file, inline styles and figures, no
script and nothing fetched from elsewhere. Shared by the bench/sweep report and the diagnosis."""

from __future__ import annotations

import html
from collections.abc import Iterable

CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;
padding:0 1em}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;
vertical-align:top}th{background:#f3f3f3;text-align:left}
pre{background:#f6f6f6;padding:8px;white-space:pre-wrap;word-break:break-all}
code{background:#f6f6f6;padding:0 2px;overflow-wrap:anywhere}
img{max-width:100%;border:1px solid #eee}.failed{color:#b00}"""


def esc(text: object) -> str:
    return html.escape(str(text))


def page(title: str, body: Iterable[str], css: str = "") -> str:
    """A whole HTML document: TITLE as its title and first heading, then BODY's parts."""
    head = (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{CSS}{css}</style></head><body><h1>{esc(title)}</h1>")
    return "\n".join([head, *body, "</body></html>"])

"""A self-contained HTML page from a report's markdown: the PNGs it references are inlined.

Rendered with the maintained ``markdown`` package (tables extension); the page carries its
own style and needs no other file, so it can be mailed or attached as it is.
"""

from __future__ import annotations

import base64
import html
import logging
import re
from pathlib import Path
from typing import Any, Callable

import markdown

from ..util.files import atomic_write_text

logger = logging.getLogger(__name__)

STYLE = """
body{font-family:system-ui,sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;
color:#1b1b1b;line-height:1.45}
h1{font-size:1.7em;border-bottom:2px solid #ddd;padding-bottom:.2em}
h2{font-size:1.3em;margin-top:1.8em;border-bottom:1px solid #eee}
table{border-collapse:collapse;font-size:88%;margin:.6em 0 1.2em;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th:first-child,td:first-child{text-align:left}
tr:nth-child(even){background:#f6f8fa}
th{background:#eef1f4}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}
code{background:#f3f3f3;padding:0 .25em;border-radius:3px}
"""

_IMG = re.compile(r'<img([^>]*?) src="([^"]+)"')


def _inline_image(match: re.Match, base_dir: Path) -> str:
    attrs, src = match.group(1), match.group(2)
    path = base_dir / src
    if src.startswith(("data:", "http:", "https:")) or not path.is_file():
        if not src.startswith(("data:", "http:", "https:")):
            logger.warning("report image %s not found; left as a link", path)
        return match.group(0)
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img{attrs} src="data:image/png;base64,{data}"'


def markdown_page(text: str, *, title: str, base_dir: str | Path) -> str:
    """A standalone HTML page of the markdown ``text``; images under ``base_dir`` inlined."""
    body = markdown.markdown(text, extensions=["tables", "sane_lists"], output_format="html")
    body = _IMG.sub(lambda m: _inline_image(m, Path(base_dir)), body)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


def write_report(result, out: Path, *, json_name: str, markdown_name: str,
                 render: Callable[[Any], str], title: str) -> Path:
    """The one report writer: ``out/json_name`` (the result, ``result.to_json``), then
    ``out/markdown_name`` (``render(result)``) and the self-contained ``out/report.html``
    of it; returns the markdown's path."""
    result.to_json(out / json_name)
    text = render(result)
    page = markdown_page(text, title=title, base_dir=out)
    atomic_write_text(out / markdown_name, text)
    atomic_write_text(out / "report.html", page)
    logger.info("%s: %s", title, out / "report.html")
    return out / markdown_name


__all__ = ["markdown_page", "write_report"]

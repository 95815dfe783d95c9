"""A self-contained HTML report: a title, then sections of text, tables and plotly figures.

Every command that has results people would rather see than read (``plan``, ``scale``,
``calibrate``, ``trace``) writes its report through :func:`write_report`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuscale import SCHEMA_VERSION, __version__, files


@dataclass(kw_only=True)
class Section:
    """One block of the report: a heading, optional prose, optional table rows and figures."""

    title: str
    text: str = ""
    rows: Sequence[Mapping[str, Any]] = ()
    figures: Sequence[Any] = field(default_factory=list)
    """plotly ``Figure`` objects."""


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in keys)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(k)))}</td>" for k in keys) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}
td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}
th{background:#f3f3f3} h1{font-size:1.6rem} h2{font-size:1.2rem;margin-top:2rem}
footer{margin-top:3rem;color:#888;font-size:.8rem}
"""


def render(title: str, sections: Sequence[Section]) -> str:
    """The whole report as one HTML string (plotly.js embedded once, works offline)."""
    parts = [f"<h1>{html.escape(title)}</h1>"]
    include_js: bool | str = True
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        if section.text:
            parts.append(f"<p>{html.escape(section.text)}</p>")
        parts.append(_table(section.rows))
        for fig in section.figures:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=include_js))
            include_js = False
    parts.append(f"<footer>gpuscale {__version__}, report schema {SCHEMA_VERSION}</footer>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>"
    )


def write_report(path: str | Path, title: str, sections: Sequence[Section]) -> Path:
    """Write the report to ``path`` (whole or not at all, gpuscale.files) and return it."""
    return files.write_text(path, render(title, sections), label="--html", field="html")


def _flat(prefix: str, value: Any, out: list[dict[str, Any]]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), item, out)
    elif isinstance(value, list | tuple):
        if value and all(not isinstance(v, Mapping | list | tuple) for v in value):
            out.append({"field": prefix, "value": ", ".join(str(v) for v in value)})
    elif prefix != "schema_version":
        out.append({"field": prefix, "value": value})


def result_sections(
    answer: str, document: Mapping[str, Any], figures: Sequence[Any]
) -> list[Section]:
    """The report of any :mod:`gpuscale.api` result: the answer in words, its figures, then every
    scalar of its ``--json`` document (inputs, assumptions, error band) as a flat table, so the
    page says everything the command said."""
    rows: list[dict[str, Any]] = []
    _flat("", document, rows)
    return [
        Section(title="Answer", text=answer),
        *([Section(title="Figures", figures=list(figures))] if figures else []),
        Section(title="Every figure of the answer (its --json)", rows=rows),
    ]

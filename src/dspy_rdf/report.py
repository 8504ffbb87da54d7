"""An HTML page with charts (PNG) of the main analytics of a store, for people who would rather look than read.

    dspy-rdf report --out report/            # then open report/index.html

Each section runs one named query of :mod:`dspy_rdf.analytics`, draws its first numeric column against its
text columns as a bar chart (matplotlib, ``pip install 'dspy-rdf[report]'``) and shows the rows as a table.
Everything from the traces is HTML-escaped: trace text is untrusted.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dspy_rdf.store import TraceStore

__all__ = ["REPORT_SECTIONS", "write_report"]

REPORT_SECTIONS: list[tuple[str, str]] = [
    ("tool_calls_per_tool", "Tool calls per tool"),
    ("tool_error_rate", "Tool error rate per tool"),
    ("unanswered_tool_calls", "Tool calls with no result"),
    ("tokens_cost_per_model_day", "Tokens and cost per model and day"),
    ("lm_calls_per_module", "LM calls and latency per module"),
    ("longest_conversations", "Longest conversations"),
    ("slowest_tool_executions", "Slowest tool executions"),
    ("finish_reasons", "Finish reasons"),
    ("refusal_traces", "Traces with a refusal"),
]
"""(query name, title) of each section, in page order."""

_MAX_BARS = 25
_MAX_ROWS = 50


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _chart(columns: list[str], rows: list[tuple], title: str, path: Path) -> bool:
    """Draw a horizontal bar chart of the first numeric column by the text columns; False when nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    numeric = next((i for i in range(len(columns)) if rows and all(_is_number(r[i]) or r[i] is None for r in rows) and any(_is_number(r[i]) for r in rows)), None)
    if numeric is None:
        return False
    labels_at = [i for i in range(len(columns)) if i != numeric and not any(_is_number(r[i]) for r in rows)]
    shown = rows[:_MAX_BARS]
    labels = [" / ".join(str(r[i]) for i in labels_at)[:60] or str(n) for n, r in enumerate(shown)]
    values = [r[numeric] or 0 for r in shown]
    figure, axes = plt.subplots(figsize=(8, 0.35 * len(shown) + 1.2))
    axes.barh(range(len(shown)), values, color="#3b6ea5")
    axes.set_yticks(range(len(shown)), labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel(columns[numeric])
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def _table(columns: list[str], rows: list[tuple]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))[:300]}</td>" for v in row) + "</tr>" for row in rows[:_MAX_ROWS]
    )
    more = f"<p>{len(rows) - _MAX_ROWS} more rows not shown.</p>" if len(rows) > _MAX_ROWS else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def write_report(store: TraceStore, out_dir: str | Path) -> Path:
    """Write ``index.html`` and one PNG per chart into ``out_dir``; return the path of the page."""
    from dspy_rdf.analytics import list_queries, run_query

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    known = {q.name: q for q in list_queries()}
    counts = store.stats()
    sections = []
    for name, title in REPORT_SECTIONS:
        if name not in known:
            continue
        result = run_query(store, name)
        columns, rows = list(result.columns), [tuple(r) for r in result.rows]
        image = out / f"{name}.png"
        picture = f'<img src="{image.name}" alt="{html.escape(title)}">' if rows and _chart(columns, rows, title, image) else ""
        question = html.escape(known[name].question)
        content = _table(columns, rows) if rows else "<p>No rows.</p>"
        sections.append(f"<section><h2>{html.escape(title)}</h2><p class=q>{question}</p>{picture}{content}</section>")
    summary = "".join(f"<tr><th>{html.escape(k.replace('_', ' '))}</th><td>{v}</td></tr>" for k, v in counts.items())
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dspy-rdf report</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}
table{{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}}td,th{{border:1px solid #ccc;padding:.2rem .4rem;text-align:left}}
img{{max-width:100%}}.q{{color:#555}}</style></head>
<body><h1>DSPy traces: analytics</h1><p>Store: {html.escape(store.location)}; generated {when}.</p>
<table>{summary}</table>
{"".join(sections)}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index

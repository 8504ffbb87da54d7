"""An HTML page with bar charts (PNG) of the main analytics of a store, for people who would rather look than read.

    dspy-rdf report --out report/            # then open report/index.html

Each section runs one named query of :mod:`dspy_rdf.analytics.catalog` and shows its rows as a table and, for most
sections, as a horizontal bar chart of the quantity its title names (:data:`REPORT_SECTIONS` says which columns
each chart plots, with what unit). Charts are built in two steps that can be checked on their own:
:func:`chart_for` turns query rows into a :class:`Chart` (labels and data series, the very values of the rows),
:func:`draw_chart` turns a chart into a matplotlib figure.

Numbers are shown rounded to a few significant digits (:func:`format_value`); costs are in US dollars, durations
in seconds, rates in percent. Every value from the traces is redacted (:data:`dspy_rdf.canonical.redact.DEFAULT_REDACTOR`)
and HTML-escaped: trace text is untrusted.

The folder is written whole or not at all: the page and its charts go to a temporary folder beside it, which then
takes the folder's place. An existing folder is only replaced when it holds a previous report.
"""

from __future__ import annotations

import html
import io
import math
import os
import secrets
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dspy_rdf.analytics.catalog import UNKNOWN, QueryResult, get_query, migrate_warning, run_query
from dspy_rdf.canonical.errors import ReportError
from dspy_rdf.canonical.identity import key_of_iri
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR
from dspy_rdf.store import QUIET_STATS, TraceStore

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "Chart",
    "MAX_BARS",
    "MAX_ROWS",
    "Panel",
    "REPORT_SECTIONS",
    "ReportError",
    "ReportSection",
    "Series",
    "UNITS",
    "chart_for",
    "column_unit",
    "draw_chart",
    "format_number",
    "format_value",
    "trace_label",
    "write_report",
]

MAX_BARS = 25
"""A chart shows the first this many rows of its query."""
MAX_ROWS = 50
"""A table shows the first this many rows of its query."""
UNITS = ("count", "USD", "s", "%")
"""Units of chart axes: a count, US dollars, seconds, percent."""

_GENERATOR = "dspy-rdf report"  # the page's <title>: marks a folder this function may replace


# --- numbers ----------------------------------------------------------------------------------------------


def _significant(value: float, digits: int) -> str:
    """``value`` rounded to ``digits`` significant digits, never in scientific notation, thousands separated."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_number(value: float, unit: str) -> str:
    """A number of a chart axis or table cell in ``unit`` (one of :data:`UNITS`), without the unit.

    >>> format_number(0.00035879999999999994, "USD"), format_number(12.3456, "s"), format_number(2172, "count")
    ('0.0003588', '12.3', '2,172')
    >>> format_number(66.66666, "%"), format_number(3.0, "count")
    ('66.7', '3')
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r} (expected one of {', '.join(UNITS)})")
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if unit == "%":
        return f"{value:,.1f}"
    return _significant(value, 3 if unit == "s" else 4)


def column_unit(column: str) -> str:
    """The unit of a query column by its name: ``cost`` in USD, ``*seconds`` in s, ``*_rate`` in %, else count."""
    if column == "cost" or column.endswith("_cost"):
        return "USD"
    if column.endswith("seconds"):
        return "s"
    if column.endswith("_rate"):
        return "%"
    return "count"


def format_value(column: str, value: Any) -> str:
    """One table cell: numbers by :func:`format_number` in the column's unit (a rate, a fraction, shown in percent),
    booleans yes/no, text redacted; nothing for an unbound value.

    >>> format_value("error_rate", 0.5), format_value("cost", 1.02e-05), format_value("failed", True)
    ('50.0', '0.0000102', 'yes')
    >>> format_value("example", "key sk-abcdefghijklmnopqrstuvwx")
    'key [REDACTED:openai_api_key]'
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        unit = column_unit(column)
        return format_number(value * 100 if unit == "%" else value, unit)
    return DEFAULT_REDACTOR.redact_text(str(value))


def _header(column: str) -> str:
    unit = column_unit(column)
    return column.replace("_", " ") + (f" ({unit})" if unit in ("USD", "%") else "")


# --- charts as data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One data series of a panel: its name (the query column, for the legend) and one value per bar."""

    name: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class Panel:
    """One bar plot of a chart: its value axis (a quantity in a unit of :data:`UNITS`) and its series, stacked."""

    quantity: str
    unit: str
    series: tuple[Series, ...]

    @property
    def axis_label(self) -> str:
        """The value axis label, with the unit."""
        return f"{self.quantity} ({self.unit})"

    @property
    def totals(self) -> tuple[float, ...]:
        """The length of each stacked bar."""
        return tuple(sum(values) for values in zip(*(s.values for s in self.series)))


@dataclass(frozen=True)
class Chart:
    """A horizontal bar chart: one bar per label (in row order, top to bottom), one panel per quantity.

    ``highlighted`` marks the bars drawn in the alert colour, with ``highlight_name`` in the legend.
    """

    title: str
    label_axis: str
    labels: tuple[str, ...]
    panels: tuple[Panel, ...]
    highlighted: tuple[bool, ...] = ()
    highlight_name: str = ""
    rows: int = 0


@dataclass(frozen=True)
class ReportSection:
    """One section of the page: a named query, its title, what its chart shows, and how to draw it.

    ``label`` makes the bar label of a row (None: a table only); ``panels`` is ``(quantity, unit, columns)`` per
    panel, the columns stacked; ``highlight`` names a boolean column whose true rows are drawn in the alert colour.
    """

    query: str
    title: str
    caption: str = ""
    label: Callable[[dict[str, Any]], str] | None = None
    label_axis: str = ""
    panels: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    highlight: str = ""


def trace_label(iri: str) -> str:
    """A short name of a trace for a chart: ``trace`` and the first 12 hex digits of its key.

    >>> trace_label("urn:dspy-rdf:trace:run-391fbab9d0c5a2a3b5b547a1d33b50aa")
    'trace 391fbab9d0c5'
    """
    key = key_of_iri(iri)
    return f"trace {key.rpartition('-')[2][:12]}" if key is not None else iri


def _time(text: Any) -> str:
    return str(text or "")[:19].replace("T", " ")


REPORT_SECTIONS: tuple[ReportSection, ...] = (
    ReportSection(
        "tool_calls_per_tool", "Tool calls per tool", "Bars: tool calls per tool, as users count them (one per call id, "
        "plus each tool execution no tool-call part asked for).",
        lambda r: r["tool"], "tool", (("tool calls", "count", ("calls",)),),
    ),
    ReportSection(
        "tool_error_rate", "Tool error rate per tool", "Bars: the share of each tool's results that are errors; "
        "the label says how many errors among how many results.",
        lambda r: f"{r['tool']} ({r['errors']} of {r['results']})", "tool (errors of results)",
        (("results that are errors", "%", ("error_rate",)),),
    ),
    ReportSection("unanswered_tool_calls", "Tool calls with no result", "A table of the tool calls that nothing answered."),
    ReportSection(
        "tokens_cost_per_model_day", "Tokens and cost per model and day", "Left: input and output tokens, stacked; "
        "right: cost in US dollars as the provider reported it; per model and day of the LM history entries.",
        lambda r: f"{r['model']} · {r['day']}", "model · day",
        (("tokens", "count", ("input_tokens", "output_tokens")), ("cost", "USD", ("cost",))),
    ),
    ReportSection(
        "lm_calls_per_module", "LM calls and latency per module", "Left: LM calls each module class made directly; "
        "right: their mean latency in seconds (recorded program runs).",
        lambda r: r["module_class"] or "(outside any module)", "module class",
        (("LM calls", "count", ("lm_calls",)), ("mean latency", "s", ("mean_seconds",))),
    ),
    ReportSection(
        "longest_conversations", "Longest conversations", "Bars: messages per trace, for the traces with the most "
        "(a trace is named by the start of its content hash, as in its IRI).",
        lambda r: f"{trace_label(r['trace'])} ({r['source_kind']})", "trace (source kind)", (("messages", "count", ("messages",)),),
    ),
    ReportSection(
        "slowest_tool_executions", "Slowest tool executions", "Bars: how long each of the slowest tool executions of "
        "recorded program runs took, in seconds; failed executions in red.",
        lambda r: f"{r['tool']} · {_time(r['started_at'])} · {trace_label(r['trace'])}", "tool · started · trace",
        (("duration", "s", ("seconds",)),), "failed",
    ),
    ReportSection(
        "tool_latency_per_tool", "Tool latency per tool", "Left: the median latency (p50) of each tool's executions in "
        "recorded program runs; right: the 95th percentile; in seconds, nearest-rank. The label says how many runs failed.",
        lambda r: f"{r['tool']} ({r['failed']} of {r['executions']} failed)", "tool (failed of runs)",
        (("median latency", "s", ("p50_seconds",)), ("95th percentile latency", "s", ("p95_seconds",))),
    ),
    ReportSection(
        "finish_reasons", "Finish reasons", "Bars: model outputs per finish reason.",
        lambda r: r["finish_reason"] or "(none recorded)", "finish reason", (("model outputs", "count", ("outputs",)),),
    ),
    ReportSection(
        "refusal_traces", "Traces with a refusal", "Bars: refusal parts per trace.",
        lambda r: f"{trace_label(r['trace'])} ({r['source_kind']})", "trace (source kind)", (("refusal parts", "count", ("refusals",)),),
    ),
)
"""The sections of the page, in page order."""


def _label(text: Any, width: int = 60) -> str:
    """A bar label: redacted, on one line, cut to ``width`` characters."""
    text = " ".join(DEFAULT_REDACTOR.redact_text(str(text)).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def chart_for(section: ReportSection, result: QueryResult) -> Chart | None:
    """The chart of ``section`` from the rows of its query (the first :data:`MAX_BARS`); None when it has no chart
    or no rows. Values are the query's (no bar for an unbound one; a panel says for how many rows its quantity is
    unknown), rates in percent; labels are redacted."""
    if section.label is None or not result.rows:
        return None
    records = result.records()[:MAX_BARS]

    def values(column: str, unit: str) -> tuple[float, ...]:
        return tuple((0 if r[column] is None else r[column]) * (100 if unit == "%" else 1) for r in records)

    def unknown_in(quantity: str, columns: tuple[str, ...]) -> str:
        """A panel's quantity, saying for how many bars the traces do not know it (drawn as no bar, never as 0)."""
        count = sum(1 for r in records if any(r[c] is None and c in result.unknown for c in columns))
        return f"{quantity} (unknown for {count} of {len(records)})" if count else quantity

    panels = tuple(
        Panel(unknown_in(quantity, columns), unit, tuple(Series(column.replace("_", " "), values(column, unit)) for column in columns))
        for quantity, unit, columns in section.panels
    )
    highlighted = tuple(bool(r[section.highlight]) for r in records) if section.highlight else ()
    return Chart(
        section.title, section.label_axis, tuple(_label(section.label(r)) for r in records), panels,
        highlighted, section.highlight if any(highlighted) else "", len(result.rows),
    )


# --- drawing ----------------------------------------------------------------------------------------------

_COLOURS = ("#3b6ea5", "#9cc3e6", "#6a9f58")
_ALERT = "#c0392b"


def _plain(text: str) -> str:
    """Text matplotlib shows as written (a ``$`` would start mathematical notation)."""
    return text.replace("$", r"\$")


def draw_chart(chart: Chart) -> Figure:
    """A matplotlib figure of ``chart`` (no pyplot, no window): one horizontal bar plot per panel, sharing the labels,
    each bar annotated with its value."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
        from matplotlib.ticker import FuncFormatter, MaxNLocator
    except ImportError:
        raise ReportError("the report draws its charts with matplotlib, which is not installed: pip install 'matplotlib>=3.8'") from None

    bars = len(chart.labels)
    figure = Figure(figsize=(4.0 + 3.6 * len(chart.panels), 0.34 * bars + 1.5), dpi=100, layout="constrained")
    axes = figure.subplots(1, len(chart.panels), sharey=True, squeeze=False)[0]
    positions = list(range(bars))
    for ax, panel in zip(axes, chart.panels):
        left = [0.0] * bars
        for index, series in enumerate(panel.series):
            colours = [_ALERT if alert else _COLOURS[index % len(_COLOURS)] for alert in chart.highlighted] or _COLOURS[index % len(_COLOURS)]
            container = ax.barh(positions, series.values, left=left, height=0.7, color=colours, label=_plain(series.name))
            left = [a + b for a, b in zip(left, series.values)]
        marks = [f" {chart.highlight_name}" if alert else "" for alert in chart.highlighted] or [""] * bars  # short bars too
        ax.bar_label(container, labels=[format_number(t, panel.unit) + m for t, m in zip(panel.totals, marks)], padding=3, fontsize=8)
        ax.set_xlabel(_plain(panel.axis_label))
        ax.set_xlim(0, (max(panel.totals, default=0) or 1) * 1.18)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=panel.unit == "count"))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos, unit=panel.unit: format_number(x, "count" if unit == "%" else unit)))
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        handles = [Patch(color=_COLOURS[i % len(_COLOURS)], label=_plain(s.name)) for i, s in enumerate(panel.series)] if len(panel.series) > 1 else []
        if chart.highlight_name:
            handles.append(Patch(color=_ALERT, label=_plain(chart.highlight_name)))
        if handles:
            ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1, 1), ncols=len(handles), fontsize=8, frameon=False)
    axes[0].set_yticks(positions, [_plain(label) for label in chart.labels], fontsize=8)
    axes[0].set_ylim(bars - 0.5, -0.5)  # first row on top
    axes[0].set_ylabel(_plain(chart.label_axis))
    shown = f" (first {bars} of {chart.rows})" if chart.rows > bars else ""
    figure.suptitle(_plain(chart.title + shown), fontsize=10)
    return figure


def _png(chart: Chart) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from")  # emoji, scripts the font lacks: boxes
        draw_chart(chart).savefig(buffer, format="png")
    return buffer.getvalue()


# --- the page ---------------------------------------------------------------------------------------------


def _table(result: QueryResult) -> str:
    numeric = [
        all(isinstance(v, (int, float)) or v is None for v in column) for column in zip(*result.rows)
    ] if result.rows else [False] * len(result.columns)
    head = "".join(f"<th{' class=n' if n else ''}>{html.escape(_header(c))}</th>" for c, n in zip(result.columns, numeric))

    def cell(column: str, value: Any, number: bool) -> str:
        text = UNKNOWN if value is None and column in result.unknown else format_value(column, value)
        text = text if len(text) <= 300 else text[:299] + "…"
        kind = " class=n" if number else " class=l" if len(text) > 30 else " class=s"  # long text (IRIs) may break anywhere
        return f"<td{kind}>{html.escape(text)}</td>"

    body = "".join(
        "<tr>" + "".join(cell(c, v, n) for c, v, n in zip(result.columns, row, numeric)) + "</tr>" for row in result.rows[:MAX_ROWS]
    )
    more = f"<p>{len(result.rows) - MAX_ROWS} more rows not shown.</p>" if len(result.rows) > MAX_ROWS else ""
    return f"<div class=wide><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{more}"


_STYLE = """body{font-family:system-ui,sans-serif;max-width:68rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.2rem .4rem;text-align:left;
vertical-align:top}.l{overflow-wrap:anywhere;min-width:12rem}.s{white-space:nowrap}.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.wide{overflow-x:auto}img{max-width:100%}.q{color:#555}.c{color:#333;font-size:.9rem}"""


def _page(store: TraceStore) -> tuple[str, dict[str, bytes]]:
    """The HTML page and its charts (file name -> PNG bytes), all in memory."""
    images: dict[str, bytes] = {}
    sections = []
    for section in REPORT_SECTIONS:
        result = run_query(store, section.query, check_migration=False)  # the summary's to_migrate says it once
        chart = chart_for(section, result)
        picture = ""
        if chart is not None:
            name = f"{section.query}.png"
            images[name] = _png(chart)
            picture = f'<p class=c>{html.escape(section.caption)}</p><img src="{name}" alt="{html.escape(section.title)}">'
        elif not section.label:
            picture = f"<p class=c>{html.escape(section.caption)}</p>"
        content = _table(result) if result.rows else "<p>No rows.</p>"
        question = html.escape(get_query(section.query).question)
        sections.append(f"<section><h2>{html.escape(section.title)}</h2><p class=q>{question}</p>{picture}{content}</section>")
    counts = {k: v for k, v in store.stats().items() if k not in QUIET_STATS or v}
    summary = "".join(
        f"<tr><th>{html.escape(k.replace('_', ' '))}</th><td class=n>{UNKNOWN if v is None else html.escape(format_value(k, v))}</td></tr>"
        for k, v in counts.items()
    )
    outdated = counts.get("to_migrate") or 0
    warning = migrate_warning(outdated, missing_from="the sections below")
    warning = f"<p><strong>{html.escape(warning)}.</strong></p>" if warning else ""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    location = html.escape(DEFAULT_REDACTOR.redact_text(store.location))
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_GENERATOR}</title>
<style>{_STYLE}</style></head>
<body><h1>DSPy traces: analytics</h1><p>Store: {location}; generated {when}. Costs in US dollars, durations in seconds.</p>
{warning}<table>{summary}</table>
{"".join(sections)}
</body></html>
"""
    return page, images


def _previous_report(folder: Path) -> bool:
    """Whether ``folder`` holds only a report this function wrote (its page and PNG charts)."""
    entries = list(folder.iterdir())
    index = folder / "index.html"
    if not index.is_file() or any(e.is_dir() or not (e.name == "index.html" or e.suffix == ".png") for e in entries):
        return False
    with index.open(encoding="utf-8", errors="replace") as handle:
        return f"<title>{_GENERATOR}</title>" in handle.read(4096)


def _check_target(out: Path) -> None:
    above = next(folder for folder in out.parents if folder.exists())
    if not above.is_dir():
        raise ReportError(f"cannot write the report to {out}: {above} is not a folder", path=str(out))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ReportError(f"{out} exists and is not a folder: choose a folder for the report", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not _previous_report(out):
        raise ReportError(
            f"{out} is not empty and holds no previous report: choose a new or empty folder (a previous report is replaced)", path=str(out)
        )


def _replace(new: Path, out: Path) -> None:
    """Put the folder ``new`` in the place of ``out`` (absent, empty, or a previous report)."""
    if not out.exists():
        os.rename(new, out)
        return
    old = out.with_name(f".{out.name}.{secrets.token_hex(4)}.old")
    os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def write_report(store: TraceStore, out_dir: str | Path) -> Path:
    """Write ``index.html`` and one PNG per chart into the folder ``out_dir``; return the path of the page.

    The folder must be absent, empty, or hold a previous report (which is replaced); it is written whole or not at
    all. A symbolic link is followed: the folder it points to is written (and the link kept). Raises
    :class:`ReportError` when it cannot be written, and what the store raises when a query fails.
    """
    given = Path(os.path.abspath(out_dir))
    out = Path(os.path.realpath(given)) if given.is_symlink() else given
    if not out.name:
        raise ReportError(f"{out} cannot hold a report: choose a folder below it", path=str(out))
    _check_target(out)
    page, images = _page(store)  # queries and drawing first: a failure there touches no file
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = out.with_name(f".{out.name}.{secrets.token_hex(4)}.tmp")
        staging.mkdir()
    except OSError as exc:
        raise ReportError(f"cannot write the report to {out}: {exc.strerror or exc}", path=str(out)) from None
    try:
        for name, data in images.items():
            (staging / name).write_bytes(data)
        (staging / "index.html").write_text(page, encoding="utf-8")
        _check_target(out)  # again: the folder may have changed while the page was made
        _replace(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, ReportError):
            raise
        raise ReportError(f"cannot write the report to {out}: {exc.strerror or exc}", path=str(out)) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return given / "index.html"

"""`dspy-rdf report`: an HTML page with a table and a bar chart per analytics section, over real stores on disk.

Charts are checked as data: the series each chart plots (and the bars of the matplotlib figure drawn from it) are the
values of its query's rows; no pixel is compared.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import dspy
import pytest
from conftest import load
from dspy.utils import DummyLM

from dspy_rdf.analytics.catalog import run_query
from dspy_rdf.analytics.report import (
    MAX_BARS,
    REPORT_SECTIONS,
    ReportError,
    chart_for,
    draw_chart,
    format_number,
    format_value,
    write_report,
)
from dspy_rdf.capture.recorder import MemorySink, TraceRecorder
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.sources.tracejson import trace_from_json
from dspy_rdf.store import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
CHARTED = [s for s in REPORT_SECTIONS if s.label is not None]


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def modulo(a: int, b: int) -> int:
    """a modulo b."""
    return a % b


def recorded_runs(runs: int) -> list:
    """Real dspy.ReAct runs (DSPy's DummyLM) recorded live: each multiplies, then takes a modulo by zero (an error)."""
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    for run in range(runs):
        lm = DummyLM(
            [
                {"next_thought": "Multiply.", "next_tool_name": "multiply", "next_tool_args": {"a": 6, "b": run}},
                {"next_thought": "Modulo zero.", "next_tool_name": "modulo", "next_tool_args": {"a": 6, "b": 0}},
                {"next_thought": "Done.", "next_tool_name": "finish", "next_tool_args": {}},
                {"reasoning": "6", "answer": "6"},
            ]
        )
        with dspy.context(lm=lm, callbacks=[recorder]):
            dspy.ReAct("question -> answer", tools=[multiply, modulo])(question=f"run {run}")
    assert recorder.errors == []
    return sink.traces


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store on disk with the bundled real traces and two recorded program runs with failing tool executions."""
    path = tmp_path_factory.mktemp("report") / "store"
    with EmbeddedStore(path) as store:
        store.put([item.trace for item in read_traces(bundled_traces_path())] + recorded_runs(2))
    return path


@pytest.fixture
def store(store_path: Path):
    with EmbeddedStore(store_path, read_only=True) as opened:
        yield opened


# --- charts show what their titles say --------------------------------------------------------------------


def test_every_section_with_a_chart_is_checked():
    assert len(CHARTED) == 9 and len(REPORT_SECTIONS) == 10


@pytest.mark.parametrize("section", CHARTED, ids=lambda s: s.query)
def test_each_chart_plots_the_values_of_its_query_rows_and_the_figure_draws_them(store, section):
    result = run_query(store, section.query)
    chart = chart_for(section, result)
    assert result.rows and chart is not None, f"the test store has no rows for {section.query}"
    records = result.records()[:MAX_BARS]
    assert len(chart.labels) == len(records) and chart.rows == len(result.rows)
    for panel, (quantity, _, columns) in zip(chart.panels, section.panels):  # a panel says for how many bars it is unknown
        unknown = sum(1 for r in records if any(r[c] is None and c in result.unknown for c in columns))
        assert panel.quantity == (f"{quantity} (unknown for {unknown} of {len(records)})" if unknown else quantity)
    for panel, (_, unit, columns) in zip(chart.panels, section.panels):
        for series, column in zip(panel.series, columns, strict=True):
            scale = 100 if unit == "%" else 1
            assert list(series.values) == [(r[column] or 0) * scale for r in records]
    figure = draw_chart(chart)
    axes = figure.axes
    assert len(axes) == len(chart.panels)
    assert [t.get_text() for t in axes[0].get_yticklabels()] == list(chart.labels)
    for ax, panel in zip(axes, chart.panels):
        assert ax.get_xlabel() == f"{panel.quantity} ({panel.unit})"
        drawn = [list(container.datavalues) for container in ax.containers]
        assert drawn == [list(series.values) for series in panel.series]


def test_the_error_rate_chart_plots_errors_over_results_in_percent(store):
    section = next(s for s in CHARTED if s.query == "tool_error_rate")
    chart = chart_for(section, run_query(store, "tool_error_rate"))
    [panel] = chart.panels
    bars = dict(zip(chart.labels, panel.series[0].values))
    # Two recorded runs: modulo by zero failed twice, multiply never; the bundled traces: "search web" 2 errors of 2.
    assert bars["modulo (2 of 2)"] == 100 and bars["search web (2 of 2)"] == 100
    assert bars["multiply (0 of 2)"] == 0 and bars["weather (0 of 1)"] == 0
    assert (panel.quantity, panel.unit) == ("results that are errors", "%")


def test_the_tokens_and_cost_chart_plots_tokens_and_dollars_not_calls(store):
    section = next(s for s in CHARTED if s.query == "tokens_cost_per_model_day")
    rows = run_query(store, "tokens_cost_per_model_day").records()
    chart = chart_for(section, run_query(store, "tokens_cost_per_model_day"))
    tokens, cost = chart.panels
    unpriced = sum(1 for r in rows if r["cost"] is None)  # a model whose calls report no cost: unknown, no bar
    assert unpriced and (tokens.axis_label, cost.axis_label) == ("tokens (count)", f"cost (unknown for {unpriced} of {len(rows)}) (USD)")
    assert list(tokens.totals) == [(r["input_tokens"] or 0) + (r["output_tokens"] or 0) for r in rows]
    assert list(cost.series[0].values) == [r["cost"] or 0 for r in rows]
    assert chart.labels[0] == f"{rows[0]['model']} · {rows[0]['day']}"


def test_slowest_tool_executions_are_labelled_by_tool_start_and_trace_and_failures_are_marked(store):
    section = next(s for s in CHARTED if s.query == "slowest_tool_executions")
    rows = run_query(store, "slowest_tool_executions").records()
    chart = chart_for(section, run_query(store, "slowest_tool_executions"))
    for label, row in zip(chart.labels, rows):
        digest = row["trace"].rpartition("-")[2][:12]
        assert label == f"{row['tool']} · {row['started_at'][:19].replace('T', ' ')} · trace {digest}"
    assert list(chart.highlighted) == [r["failed"] for r in rows] and chart.highlight_name == "failed"
    assert sum(chart.highlighted) == 2 and {row["tool"] for row in rows if row["failed"]} == {"modulo"}
    assert chart.panels[0].axis_label == "duration (s)"


def test_tool_latency_shows_median_and_95th_percentile_per_tool_labelled_with_failures(store):
    section = next(s for s in CHARTED if s.query == "tool_latency_per_tool")
    rows = run_query(store, "tool_latency_per_tool").records()
    chart = chart_for(section, run_query(store, "tool_latency_per_tool"))
    median, tail = chart.panels
    assert (median.axis_label, tail.axis_label) == ("median latency (s)", "95th percentile latency (s)")
    assert list(chart.labels) == [f"{r['tool']} ({r['failed']} of {r['executions']} failed)" for r in rows]
    assert "modulo (2 of 2 failed)" in chart.labels and "multiply (0 of 2 failed)" in chart.labels
    assert list(median.series[0].values) == [r["p50_seconds"] for r in rows]
    assert list(tail.series[0].values) == [r["p95_seconds"] for r in rows]


# --- numbers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column, value, shown",
    [
        ("cost", 0.00035879999999999994, "0.0003588"),
        ("cost", 0.000123456789, "0.0001235"),
        ("cost", 12.345678, "12.35"),
        ("cost", 0.0, "0"),
        ("mean_seconds", 0.00019876, "0.000199"),
        ("seconds", 1234.5678, "1,235"),
        ("seconds", 9.9996, "10"),
        ("error_rate", 2 / 3, "66.7"),
        ("error_rate", 1.0, "100.0"),
        ("input_tokens", 1234567, "1,234,567"),
        ("failed", False, "no"),
        ("error", None, ""),
    ],
)
def test_table_cells_round_numbers_to_a_few_significant_digits_in_the_unit_of_the_column(column, value, shown):
    assert format_value(column, value) == shown


def test_an_unknown_unit_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown unit 'kg'"):
        format_number(1.0, "kg")


def test_the_page_shows_no_float_noise(store, tmp_path):
    text = write_report(store, tmp_path / "out").read_text(encoding="utf-8")
    assert "0.00035879999999999994" not in text and ">0.0003588<" in text
    assert not re.search(r">-?[\d,]*\.\d{8,}<", text), "a number with more digits than its precision"
    assert "<th class=n>error rate (%)</th>" in text and "<td class=n>100.0</td>" in text


# --- trace text is untrusted ------------------------------------------------------------------------------


def test_trace_text_is_escaped_and_secrets_are_redacted_in_tables_and_chart_labels(tmp_path):
    tool = load("part_tool_call.json")
    tool["messages"][0]["parts"][0]["name"] = f"<script>alert(1)</script> $x^$ {SECRET}"
    refusal = load("part_refusal.json")
    refusal["messages"][0]["parts"][0]["text"] = f"Your key {SECRET} is not mine to use."
    with EmbeddedStore(tmp_path / "store") as store:
        store.put([trace_from_json(tool), trace_from_json(refusal)], redactor=None)  # stored as given
        assert SECRET in run_query(store, "refusal_traces").rows[0][3]
        page = write_report(store, tmp_path / "report")
        labels = [label for s in CHARTED if (c := chart_for(s, run_query(store, s.query))) for label in c.labels]
    text = page.read_text(encoding="utf-8")
    assert SECRET not in text and "[REDACTED:openai_api_key]" in text
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert any("[REDACTED:openai_api_key]" in label for label in labels) and not any(SECRET in label for label in labels)
    charts = sorted(p.name for p in page.parent.glob("*.png"))
    assert charts == ["longest_conversations.png", "refusal_traces.png", "tool_calls_per_tool.png"]
    for chart in charts:
        assert (page.parent / chart).read_bytes().startswith(PNG_MAGIC) and f'src="{chart}"' in text
    for section in REPORT_SECTIONS:
        assert f"<h2>{section.title}</h2>" in text


# --- the folder is written whole or not at all ------------------------------------------------------------


def test_a_second_report_replaces_the_first_whole(store, tmp_path):
    out = tmp_path / "report"
    write_report(store, out)
    assert (out / "slowest_tool_executions.png").exists()
    with EmbeddedStore(tmp_path / "demo") as demo:
        demo.put([item.trace for item in read_traces(bundled_traces_path())])
        write_report(demo, out)
    assert not (out / "slowest_tool_executions.png").exists()  # the demo traces have no program run
    assert (out / "index.html").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_folder_that_holds_something_else_is_refused_and_left_alone(store, tmp_path):
    out = tmp_path / "docs"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ReportError, match="is not empty and holds no previous report"):
        write_report(store, out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


def run_cli(args: list[str], *, prelude: str = "", cwd: Path) -> subprocess.CompletedProcess:
    """``dspy-rdf`` in a process of its own, after ``prelude`` (Python run first)."""
    script = prelude + f"\nimport sys\nfrom dspy_rdf.cli.main import main\nsys.exit(main({args!r}))\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_a_report_that_fails_while_writing_leaves_no_folder_and_keeps_the_previous_one(store_path, tmp_path):
    out = tmp_path / "report"
    # Files may grow to 20 kB in the child (RLIMIT_FSIZE): the first chart fits, a later one does not.
    limit = "import resource, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\nresource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))"
    failed = run_cli(["report", "--store", str(store_path), "--out", str(out)], prelude=limit, cwd=tmp_path)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    assert failed.stderr.startswith(f"error: cannot write the report to {out}: File too large")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither the folder nor a temporary one
    assert run_cli(["report", "--store", str(store_path), "--out", str(out)], cwd=tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    failed = run_cli(["report", "--store", str(store_path), "--out", str(out)], prelude=limit, cwd=tmp_path)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before and sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_without_matplotlib_the_report_is_a_one_line_error_with_the_install_hint(store_path, tmp_path):
    blocked = "import sys\nsys.modules['matplotlib'] = None  # import matplotlib raises ImportError"
    failed = run_cli(["report", "--store", str(store_path), "--out", str(tmp_path / "out")], prelude=blocked, cwd=tmp_path)
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    assert "matplotlib, which is not installed: pip install" in failed.stderr and not (tmp_path / "out").exists()


def test_the_report_command_reads_a_store(tmp_path, capsys):
    store = str(tmp_path / "store")
    assert main(["export", str(bundled_traces_path()), "--store", store]) == 0
    assert main(["report", "--store", store, "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "index.html").exists()
    assert f"wrote {tmp_path / 'out' / 'index.html'}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--store", "{tmp}/nothing", "--out", "{tmp}/out"], "error: no store at {tmp}/nothing"),
        (["--store", "{store}", "--out", "{tmp}/file.txt"], "error: {tmp}/file.txt exists and is not a folder"),
        (["--store", "{store}", "--out", "{tmp}/file.txt/out"], "error: cannot write the report to {tmp}/file.txt/out: {tmp}/file.txt is not a folder"),
    ],
)
def test_bad_report_arguments_are_one_line_errors_and_write_nothing(store_path, tmp_path, capsys, args, message):
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    fill = {"tmp": str(tmp_path), "store": str(store_path)}
    assert main(["report"] + [a.format(**fill) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(**fill)) and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


# --- installation -----------------------------------------------------------------------------------------


def test_the_readme_install_command_installs_what_the_report_needs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)\n```", readme, re.S).group(1)
    words = shlex.split(first.replace("&&", " && "))
    target = words[words.index("-e") + 1]
    extras = re.fullmatch(r"\.(?:\[(.*)\])?", target).group(1)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    installed = list(project["dependencies"]) + [r for e in (extras or "").split(",") if e for r in project["optional-dependencies"][e]]
    assert any(re.match(r"matplotlib\b", requirement) for requirement in installed), textwrap.shorten(first, 120)
    assert "dspy-rdf report" in readme and "dspy-rdf demo" in first

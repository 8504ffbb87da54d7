"""`dspy-rdf report`: an HTML page with PNG charts of the main analytics, with trace text escaped."""

from __future__ import annotations

from conftest import load
from dspy_rdf.cli import main
from dspy_rdf.demo import bundled_traces_path
from dspy_rdf.inputs import read_traces
from dspy_rdf.report import REPORT_SECTIONS, write_report
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.tracejson import trace_from_json

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_report_has_a_chart_and_a_table_per_section_and_escapes_trace_text(tmp_path):
    hostile = load("part_tool_call.json")
    hostile["messages"][0]["parts"][0]["name"] = "<script>alert(1)</script>"
    with EmbeddedStore(tmp_path / "store") as store:
        store.put([item.trace for item in read_traces(bundled_traces_path())] + [trace_from_json(hostile)])
        page = write_report(store, tmp_path / "report")
    text = page.read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    charts = sorted(p.name for p in page.parent.glob("*.png"))
    assert "tool_calls_per_tool.png" in charts and "finish_reasons.png" in charts
    for chart in charts:
        assert (page.parent / chart).read_bytes().startswith(PNG_MAGIC)
        assert f'src="{chart}"' in text
    for _, title in REPORT_SECTIONS:
        assert f"<h2>{title}</h2>" in text


def test_the_report_command_reads_a_store(tmp_path, capsys):
    store = str(tmp_path / "store")
    assert main(["export", str(bundled_traces_path()), "--store", store]) == 0
    assert main(["report", "--store", store, "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "index.html").exists()
    assert "wrote" in capsys.readouterr().out

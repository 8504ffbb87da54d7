"""The main job on the embedded default: export the bundled real DSPy traces into an on-disk pyoxigraph store
(one named graph per trace), validate them with the generated shapes, and print analytics from the
``.rq`` queries shipped in ``dspy_rdf/analytics/queries/``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from dspy_rdf.analytics.catalog import run_query
from dspy_rdf.inputs import read_traces
from dspy_rdf.store import DEFAULT_STORE, EmbeddedStore, open_store
from dspy_rdf.validation import validate_traces

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["DEFAULT_STORE", "bundled_traces_path", "run_demo"]


def bundled_traces_path() -> Path:
    """The JSON Lines file of real DSPy 3.3.1 traces that ships with the package."""
    return Path(str(resources.files("dspy_rdf") / "examples" / "dspy33_traces.jsonl"))


_DEMO_QUERIES: list[tuple[str, dict[str, str], str]] = [
    ("part_kinds", {}, "Parts by kind"),
    ("tool_calls_per_tool", {}, "Tool calls per tool"),
    ("tool_error_rate", {}, "Tool error rate"),
    ("unanswered_tool_calls", {}, "Tool calls with no result"),
    ("tokens_per_model", {}, "LM calls, tokens and cost per model"),
    ("finish_reasons", {}, "Finish reasons"),
    ("longest_conversations", {"limit": "5"}, "Longest conversations"),
]


def run_demo(*, store: str | Path | None = None, out: SupportsWrite[str]) -> int:
    """Run the main job into the embedded store at ``store`` (a directory; the default store when None); return 0
    when every trace was stored and conforms."""
    opened = open_store(store)
    if not isinstance(opened, EmbeddedStore):
        opened.close()
        raise ValueError("the demo writes into the embedded store: give --store a directory")
    with opened as embedded:
        items = list(read_traces(bundled_traces_path()))
        traces = [item.trace for item in items if item.trace is not None]
        put = embedded.put(traces)
        counts = embedded.stats()
        kept = f"; {len(put.already_stored)} were stored already and kept as they are" if put.already_stored else ""
        print(
            f"exported {len(put.written) + len(put.already_stored)} bundled DSPy 3.3.1 traces into {embedded.location} "
            f"({counts['traces']} traces, {counts['triples']} triples in the store{kept})",
            file=out,
        )
        report = validate_traces(traces)
        print(f"SHACL: {'all traces conform' if report.conforms else report}", file=out)
        for name, params, title in _DEMO_QUERIES:
            result = run_query(embedded, name, params)
            print(f"\n{title}  (dspy-rdf query {name}{''.join(f' --param {k}={v}' for k, v in params.items())})", file=out)
            print(result.to_table(max_width=50), file=out)
    return 0 if report.conforms and len(traces) == len(items) and not put.failed else 1

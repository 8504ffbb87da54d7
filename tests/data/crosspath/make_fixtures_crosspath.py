"""Regenerate the cross-producer fixtures in this directory: ONE execution of each of three DSPy programs, recorded at
once, in one process, by several recorders, so that the tests can check that every way in gives the same answers.

    /path/to/mlflow3-venv/bin/python tests/data/crosspath/make_fixtures_crosspath.py    # MLflow 3, DSPy 3.3.1
    /path/to/mlflow2-venv/bin/python tests/data/crosspath/make_fixtures_crosspath.py    # MLflow 2.22, DSPy 3.3.1
    /path/to/dspy341-venv/bin/python tests/data/crosspath/make_fixtures_crosspath.py    # MLflow 3, DSPy 3.4.1

The script picks what to run and write from the versions it finds. The environments (Python 3.11; MLflow 3.18.0 is
listed on PyPI but its ``mlflow-skinny`` pin does not install):

- MLflow 3: ``pip install -e ".[fixtures]" "mlflow==3.17.2"`` (DSPy 3.3.1, ``openinference-instrumentation-dspy``,
  the OpenTelemetry SDK and OTLP encoder);
- MLflow 2: ``pip install -e . "mlflow-skinny==2.22.1" "dspy==3.3.1" "litellm>=1.65.8,<1.108.1" numpy pandas mcp
  "opentelemetry-sdk==1.33.1" "opentelemetry-api==1.33.1"`` (MLflow 2.22 cannot end its spans with a newer SDK);
- DSPy 3.4.1: ``pip install -e ".[test-tools]" "dspy==3.4.1" "mlflow==3.17.2" "opentelemetry-sdk>=1.30,<2"
  "opentelemetry-exporter-otlp-proto-common>=1.30,<2" "openinference-instrumentation-dspy>=0.1.40"`` (the
  ``fixtures`` extra pins DSPy 3.3.1).

The programs (``crosspath_programs.py``) run on the real ``dspy.LM`` (LiteLLM ``mock_response`` /
``mock_tool_calls``), each one top-level call, so one trace per program per recorder, in this order:

1. ``react``: ``dspy.ReAct`` with ``add`` and ``divide``; ``divide`` by zero raises;
2. ``native``: native parallel tool calls (one response asks for ``add`` and ``divide``); ``CallTools`` runs both,
   ``divide`` raises;
3. ``nested``: ``DraftThenAnswer`` calls two ``dspy.ChainOfThought``; the first one's LM call fails (a 503 from the
   provider, LiteLLM retries it 3 times, all within one ``dspy.LM`` call, DSPy raises ``LMServerError``; the ``ChatAdapter`` does not fall back to the
   ``JSONAdapter`` on an ``LMError``), the module catches it and the second one answers.

Files, MLflow 3 and DSPy 3.3.1 (all the recorders active during the same execution):

- ``capture.jsonl``: dspy-rdf's live capture, ``TraceRecorder(FileSink(...))`` appended to ``dspy.settings.callbacks``
  beside MLflow's own callback, one run per line (3 runs);
- ``mlflow3_traces.jsonl``: ``mlflow.dspy.autolog()`` into a SQLite tracking store, ``Trace.to_json()`` one trace per
  line (3 traces);
- ``mlflow3_search_page.json``: what ``mlflow traces search --output json`` prints for them (MLflow's CLI, run in a
  subprocess on the same store);
- ``openinference.json``: OpenInference's ``DSPyInstrumentor`` on an OpenTelemetry SDK ``TracerProvider`` with an
  in-memory exporter, as OTLP/JSON (hex ids, enums as numbers; 3 trace ids);
- ``mlflow_otlp.json``: the same MLflow spans through MLflow's own OTLP export in the GenAI conventions
  (``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true``, ``MLFLOW_TRACE_ENABLE_OTLP_DUAL_EXPORT=true`` so that the tracking store
  gets them too), its exporter swapped for an in-memory one, as OTLP/JSON (3 trace ids);
- ``facts.json``: the ground truth, from the programs themselves (``crosspath_programs.Ledger``: the LM's ``forward``,
  the tools' own functions, the modules' ``forward``), not from any recorder: per program, the LM calls, how many
  failed (and LiteLLM's attempts), the usage and cost of each successful call as ``lm.history`` holds them, the tool
  executions (name, arguments, whether they raised), the module calls and their classes; and the versions.

MLflow 2.22 and DSPy 3.3.1 (capture and MLflow 2's autolog, file store): ``capture_mlflow2.jsonl``,
``mlflow2_traces.json`` (a JSON list of ``Trace.to_json()``), ``facts_mlflow2.json``.

DSPy 3.4.1 and MLflow 3: the MLflow 3 files with a ``_dspy341`` suffix.

What the recorders themselves leave out (so the recordings differ where the execution did not): MLflow's autolog
(2 and 3) records no span for ``dspy.ReAct``'s ``finish`` tool; MLflow 3 puts token usage on the root span and in the
trace's metadata only, MLflow 2 and OpenInference record none; the live capture keeps no request for the LM call that
failed (DSPy writes no history entry for it), the span recorders keep its input messages; MLflow's GenAI translation
drops the input and output messages of every LM call that succeeded (it keeps those of the failed one) and names module
spans by their kind (``generate_content``, ``CHAIN``), not their class. MLflow's spans and OpenInference's do not
nest into each other: MLflow keeps its own tracer provider and context (``MLFLOW_USE_DEFAULT_TRACER_PROVIDER`` left
at its default). The ledger's wrappers of the modules' ``forward`` are frames of the stack traces the recorders keep;
the tools write to the ledger themselves, so ``dspy.ReAct``'s observation of the failing tool shows no extra frame.

Absolute paths of this machine (site-packages, the repository, the temporary directory, the Python prefix, the
standard library, the home directory, in stack traces and in code locations of span attributes) and the user are
replaced by placeholders before writing.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPO / "tests"))
from otlp_json import otlp_json  # noqa: E402

import mlflow  # noqa: E402

MLFLOW_MAJOR = int(mlflow.__version__.split(".")[0])
if MLFLOW_MAJOR >= 3:
    # MLflow's OTLP export in the GenAI conventions, beside (not instead of) the tracking store; read when MLflow
    # sets up its tracer provider, so before the first trace
    os.environ["MLFLOW_ENABLE_OTEL_GENAI_SEMCONV"] = "true"
    os.environ["MLFLOW_TRACE_ENABLE_OTLP_DUAL_EXPORT"] = "true"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:4318/v1/traces"  # never reached: swapped below
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
else:
    import opentelemetry.sdk.trace  # noqa: F401,E402 - MLflow 2.22 needs the SDK imported before DSPy

import crosspath_programs  # noqa: E402
import dspy  # noqa: E402

from dspy_rdf.capture.recorder import FileSink, TraceRecorder  # noqa: E402

DSPY_341 = dspy.__version__.startswith("3.4")
SUFFIX = "_dspy341" if DSPY_341 else ""


def scrub(text: str, tmp: str) -> str:
    """Replace this machine's paths and user in ``text`` (JSON) with placeholders."""
    paths = [
        (sysconfig.get_paths()["purelib"], "<site-packages>"),
        (sysconfig.get_paths()["platlib"], "<site-packages>"),
        (str(REPO), "<repo>"),
        (os.path.realpath(REPO), "<repo>"),
        (os.path.realpath(tmp), "<tmp>"),
        (tmp, "<tmp>"),
        (sys.prefix, "<python>"),
        (sysconfig.get_paths()["stdlib"], "<stdlib>"),
        (sys.base_prefix, "<python-base>"),
        (tempfile.gettempdir(), "<tmp>"),
        (os.path.expanduser("~"), "<home>"),
    ]
    for path, mark in sorted(paths, key=lambda pair: -len(pair[0])):  # the longest first: site-packages is in prefix
        if path and path != "/":
            text = text.replace(path, mark)
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "root"
    return text.replace(f'"mlflow.user": "{user}"', '"mlflow.user": "<user>"').replace('\\"mlflow.user\\": \\"' + user + '\\"', '\\"mlflow.user\\": \\"<user>\\"')


def write(name: str, text: str, tmp: str) -> None:
    text = scrub(text, tmp)
    (HERE / name).write_text(text, encoding="utf-8")
    print(f"wrote {name} ({len(text.encode())} bytes)")




def trace_ids(data: dict) -> set[str]:
    return {span["traceId"] for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for name in ("dspy", "litellm", "mlflow", "mlflow-skinny", "openinference-instrumentation-dspy", "opentelemetry-sdk", "dspy-rdf"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def facts_document(facts: dict, recorders: list[str], callbacks: list[str]) -> str:
    document = {
        "about": "What the three programs of crosspath_programs.py really did in the execution the other files of this "
        "directory recorded, written down by the programs' own objects (crosspath_programs.Ledger), not by a recorder. "
        "Programs in run order; each is one top-level call and one trace in each recording.",
        "versions": versions(),
        "recorders": recorders,
        "dspy_callbacks": callbacks,
        "program_order": list(crosspath_programs.PROGRAMS),
        "programs": facts,
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def record(tmp: str) -> tuple[dict, list[str], list[str], dict]:
    """Set up every recorder this environment has, run the programs once, and return the facts and recordings."""
    out: dict[str, object] = {}
    recorders = []
    experiment_id = None
    if MLFLOW_MAJOR >= 3:
        import mlflow.tracing.provider as provider
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        mlflow_otlp = InMemorySpanExporter()
        provider.get_otlp_exporter = lambda: mlflow_otlp  # what MLflow's OtelSpanProcessor would send to the endpoint
        uri = f"sqlite:///{tmp}/mlflow.db"
    else:
        uri = f"file://{tmp}/mlruns"
    mlflow.set_tracking_uri(uri)
    # the artifact root in the temporary directory (a SQLite store's default is ./mlruns of the working directory)
    artifacts = {"artifact_location": f"file://{tmp}/artifacts"} if MLFLOW_MAJOR >= 3 else {}
    experiment_id = mlflow.create_experiment("dspy-rdf-crosspath", **artifacts)
    mlflow.set_experiment(experiment_id=experiment_id)
    mlflow.dspy.autolog()
    recorders.append(f"mlflow {mlflow.__version__} dspy autolog ({uri.split(':')[0]} store)")

    instrumentor = None
    if MLFLOW_MAJOR >= 3:
        from openinference.instrumentation.dspy import DSPyInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        openinference = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(openinference))
        instrumentor = DSPyInstrumentor()
        instrumentor.instrument(tracer_provider=tracer_provider)
        recorders.append("openinference DSPyInstrumentor (OpenTelemetry SDK, in-memory exporter)")
        recorders.append("mlflow OTLP export, GenAI conventions (dual export, in-memory exporter)")

    capture = Path(tmp) / "capture.jsonl"
    recorder = TraceRecorder(FileSink(capture))
    dspy.configure(callbacks=[*(dspy.settings.callbacks or []), recorder])  # keep MLflow's callback
    callbacks = [f"{type(cb).__module__}.{type(cb).__qualname__}" for cb in dspy.settings.callbacks]
    assert len(callbacks) == 2 and callbacks[-1] == "dspy_rdf.capture.recorder.TraceRecorder", callbacks
    recorders.insert(0, "dspy-rdf TraceRecorder(FileSink(.jsonl))")
    try:
        facts = crosspath_programs.run_programs()
    finally:
        if instrumentor is not None:
            instrumentor.uninstrument()
    recorder.flush()
    recorder.close()
    assert not recorder.errors, recorder.errors
    lines = capture.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3, len(lines)
    out["capture"] = "".join(line + "\n" for line in lines)

    if hasattr(mlflow, "flush_trace_async_logging"):
        mlflow.flush_trace_async_logging()
    where = {"locations": [experiment_id]} if "locations" in inspect.signature(mlflow.search_traces).parameters else {"experiment_ids": [experiment_id]}
    found = mlflow.search_traces(**where, return_type="list", order_by=["timestamp_ms ASC"])
    assert len(found) == 3, found
    if MLFLOW_MAJOR >= 3:
        out["mlflow3_traces"] = "".join(t.to_json() + "\n" for t in found)
        page = subprocess.run(
            [sys.executable, "-m", "mlflow", "traces", "search", "--experiment-id", experiment_id, "--output", "json", "--order-by", "timestamp_ms ASC"],
            env={**os.environ, "MLFLOW_TRACKING_URI": uri}, check=True, capture_output=True, text=True,
        ).stdout
        assert len(json.loads(page)["traces"]) == 3
        out["mlflow3_search_page"] = page
        provider.provider.get().force_flush()  # MLflow's OTLP processor exports in batches
        data = otlp_json(mlflow_otlp.get_finished_spans())
        assert len(trace_ids(data)) == 3, trace_ids(data)
        out["mlflow_otlp"] = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        tracer_provider.force_flush()
        data = otlp_json(openinference.get_finished_spans())
        assert len(trace_ids(data)) == 3, trace_ids(data)
        out["openinference"] = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    else:
        out["mlflow2_traces"] = json.dumps([json.loads(t.to_json()) for t in found], indent=1) + "\n"
    return facts, recorders, callbacks, out


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="crosspath-") as tmp:
        facts, recorders, callbacks, out = record(tmp)
        facts_text = facts_document(facts, recorders, callbacks)
        if MLFLOW_MAJOR >= 3:
            write(f"capture{SUFFIX}.jsonl", out["capture"], tmp)
            write(f"mlflow3_traces{SUFFIX}.jsonl", out["mlflow3_traces"], tmp)
            write(f"mlflow3_search_page{SUFFIX}.json", out["mlflow3_search_page"], tmp)
            write(f"openinference{SUFFIX}.json", out["openinference"], tmp)
            write(f"mlflow_otlp{SUFFIX}.json", out["mlflow_otlp"], tmp)
            write(f"facts{SUFFIX}.json", facts_text, tmp)
        else:
            write("capture_mlflow2.jsonl", out["capture"], tmp)
            write("mlflow2_traces.json", out["mlflow2_traces"], tmp)
            write("facts_mlflow2.json", facts_text, tmp)


if __name__ == "__main__":
    main()

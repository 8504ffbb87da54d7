"""Regenerate the MLflow trace fixtures in this directory from real runs of MLflow's DSPy autolog, offline.

    python tests/data/mlflow/make_fixtures_mlflow.py          # with MLflow 3 (pip install -e ".[fixtures]")
    /path/to/mlflow2-venv/bin/python tests/data/mlflow/make_fixtures_mlflow.py

The MLflow 2 environment: ``pip install "mlflow-skinny==2.22.1" "dspy==3.3.1" numpy pandas mcp "opentelemetry-sdk==1.33.1"
"opentelemetry-api==1.33.1"`` (MLflow 2.22 cannot end its spans with the OpenTelemetry SDK of 2026, 1.45).

The three programs of ``tests/traced_programs.py`` (Predict, ReAct with a failing tool, native tool calling) run on the
real ``dspy.LM`` (LiteLLM ``mock_response`` / ``mock_tool_calls``) under ``mlflow.dspy.autolog()``; their traces are
read back from the tracking store and written as MLflow writes them:

- MLflow 3, SQLite store: ``mlflow3_sqlite_traces.jsonl`` (``Trace.to_json()``, one trace per line) and
  ``mlflow3_search_page.json`` (what ``mlflow traces search --output json`` prints, run as MLflow's own CLI);
- MLflow 3, file store: ``mlflow3_file_store_list.json`` (a JSON list of ``Trace.to_dict()``);
- MLflow 2 (file store; ``mlflow-skinny`` has no SQL store): ``mlflow2_file_store_list.json``.

Absolute paths of this machine (site-packages in stack traces, the temporary tracking store, the user) are replaced
by placeholders before writing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps the file store in maintenance mode behind this switch
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests"))

import mlflow  # noqa: E402
from traced_programs import run_programs  # noqa: E402

MAJOR = int(mlflow.__version__.split(".")[0])


def scrub(text: str, tmp: str) -> str:
    """Replace this machine's paths and user in ``text`` (JSON) with placeholders."""
    for path, mark in (
        (sysconfig.get_paths()["purelib"], "<site-packages>"),
        (str(REPO), "<repo>"),
        (tmp, "<tmp>"),
        (os.path.realpath(tmp), "<tmp>"),
        (sys.prefix, "<python>"),
    ):
        text = text.replace(path, mark)
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "root"
    return text.replace(f'"mlflow.user": "{user}"', '"mlflow.user": "<user>"')


def traces(uri: str) -> list:
    """Run the programs with autolog against the tracking store at ``uri``; its traces, in start order."""
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.set_experiment("dspy-rdf-fixtures")
    mlflow.dspy.autolog()
    run_programs()
    if hasattr(mlflow, "flush_trace_async_logging"):
        mlflow.flush_trace_async_logging()
    found = mlflow.search_traces(experiment_ids=[experiment.experiment_id], return_type="list", order_by=["timestamp_ms ASC"])
    assert len(found) == 3, found
    return found, experiment.experiment_id


def write(name: str, text: str, tmp: str) -> None:
    (HERE / name).write_text(scrub(text, tmp), encoding="utf-8")
    print(f"wrote {name}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if MAJOR >= 3:
            uri = f"sqlite:///{tmp}/mlflow.db"
            found, experiment_id = traces(uri)
            write("mlflow3_sqlite_traces.jsonl", "".join(t.to_json() + "\n" for t in found), tmp)
            page = subprocess.run(
                [sys.executable, "-m", "mlflow", "traces", "search", "--experiment-id", experiment_id, "--output", "json", "--order-by", "timestamp_ms ASC"],
                env={**os.environ, "MLFLOW_TRACKING_URI": uri}, check=True, capture_output=True, text=True,
            ).stdout
            json.loads(page)
            write("mlflow3_search_page.json", page, tmp)
            found, _ = traces(f"file://{tmp}/mlruns")
            write("mlflow3_file_store_list.json", json.dumps([t.to_dict() for t in found], indent=1, default=str) + "\n", tmp)
        else:
            found, _ = traces(f"file://{tmp}/mlruns")
            write("mlflow2_file_store_list.json", json.dumps([json.loads(t.to_json()) for t in found], indent=1) + "\n", tmp)


if __name__ == "__main__":
    main()

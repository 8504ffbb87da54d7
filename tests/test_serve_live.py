"""Real producers pointed at ``dspy-rdf serve``: OpenInference's DSPy instrumentor and MLflow 3's autolog, each with
its own OTLP/HTTP exporter, while the real ``dspy.LM`` programs of ``tests/data/crosspath`` run (offline, LiteLLM
mock responses). Each exporter's spans are also kept in a file; the served store must hold the traces ``export`` makes
of that file, IRI for IRI, quad for quad, and answer every canned query with the same rows; MLflow's own record of the
same runs (``Trace.to_json()``) must name the same traces.

The producers run in an environment of their own (``.venv-producers`` at the root of the repository: DSPy 3.3.1, MLflow
3, OpenInference, the OpenTelemetry SDK and its OTLP/HTTP exporter), built on first use.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from servers import ServerUnavailable, environment
from test_serve import _serve, exported, quads, rows

from dspy_rdf.store import open_store
from dspy_rdf.store.embedded import EmbeddedStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PRODUCERS = (
    "dspy==3.3.1 litellm==1.108.0 mlflow==3.17.2 openinference-instrumentation-dspy==0.1.48 "
    "opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 mcp==2.3.0"
)


def _wait_stored(url: str, traces: int, seconds: float = 60) -> dict:
    import time

    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/status").json()
        if status["traces"]["written"] >= traces and status["traces"]["gathering"] == 0:
            return status
        time.sleep(0.1)
    raise AssertionError(f"not stored: {httpx.get(f'{url}/status').json()}")


def test_openinference_and_mlflow_exporters_pointed_at_serve_give_the_traces_of_their_files(tmp_path):
    try:
        python = environment(ROOT / ".venv-producers", PRODUCERS) / "bin" / "python"
    except ServerUnavailable as exc:
        pytest.skip(f"cannot build the producers' environment here: {exc}")
    out = tmp_path / "out"
    out.mkdir()
    servers = {name: _serve(tmp_path / name, tmp_path / f"{name}.spool", tmp_path / f"{name}.log", grace=0.5) for name in ("oi", "mlflow")}
    try:
        done = subprocess.run(
            [str(python), str(ROOT / "tests" / "producers" / "otlp_live.py"), f"{servers['oi'][1]}/v1/traces", f"{servers['mlflow'][1]}/v1/traces", str(out)],
            capture_output=True, text=True, timeout=600, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and "recorded 3 MLflow traces" in done.stdout, done.stderr[-3000:]
        for name, (_, url) in servers.items():
            status = _wait_stored(url, 3)
            assert status["traces"]["failed"] == 0 and status["received"]["rejected_spans"] == 0, (name, status)
        pairs = {"oi": out / "openinference.json", "mlflow": out / "mlflow_otlp.json"}
        for name, path in pairs.items():
            with open_store(servers[name][1]) as served, EmbeddedStore(exported(path, tmp_path / f"{name}-file")) as file:
                assert len(file.trace_iris()) == 3 and sorted(served.trace_iris()) == sorted(file.trace_iris()), name
                assert rows(served) == rows(file), name
                assert quads(served) == quads(file), name
        # MLflow's own record of the same three runs: the same executions, so the same trace IRIs
        with open_store(servers["mlflow"][1]) as served, EmbeddedStore(exported(out / "mlflow3_traces.jsonl", tmp_path / "mlflow-json")) as own:
            assert sorted(served.trace_iris()) == sorted(own.trace_iris())
    finally:
        for process, _ in servers.values():
            process.send_signal(signal.SIGTERM)
            process.wait(30)

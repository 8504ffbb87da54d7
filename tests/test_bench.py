"""Every benchmark runs on the code as it is: each script of ``bench/`` on its smallest workload, in a temporary
working directory (what it measures is in docs/benchmarks.md; no figure is checked here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"

SMALLEST = {
    "bench_mapping.py": ["--repeat", "1", "--copies", "1"],
    "bench_redact.py": ["--repeat", "1", "--sizes", "3000"],
    "bench_store.py": ["--lm-calls", "30", "--skip-rdflib", "--modes", "default", "--repeat", "1", "--workdir", "{tmp}"],
    "bench_store_puts.py": ["--runs", "4", "--window", "2"],
    "bench_export.py": ["--lm-calls", "30", "--repeat", "1", "--outputs", "store", "nq", "--workdir", "{tmp}"],
    "bench_quad_order.py": ["--lm-calls", "30", "--repeat", "1", "--workdir", "{tmp}"],
    "bench_validate.py": ["--lm-calls", "30", "--pyshacl-max", "30", "--repeat", "1", "--workdir", "{tmp}"],
    "bench_imports.py": ["--copies", "1", "--rounds", "1"],
    "bench_serve.py": ["--copies", "1", "--rounds", "1"],
    "bench_scale.py": ["--lm-calls", "30", "--runs", "1", "--workdir", "{tmp}"],
    "bench_query_revisions.py": ["--lm-calls", "30", "--workdir", "{tmp}", "--baseline", "HEAD", "--runs", "1", "refusal_traces", "unanswered_tool_calls"],
    "bench_capture.py": ["--runs", "2", "--rounds", "1", "--slow-runs", "1", "--slow-rounds", "1", "--lm-seconds", "0.001", "--handler-rounds", "1"],
    "bench_remote.py": ["--traces", "5", "--repeat", "1", "--workdir", "{tmp}"],
    "bench_servers.py": ["--lm-calls", "30", "--runs", "1", "--buffers", "20000", "--workdir", "{tmp}"],
}


def test_every_benchmark_script_is_listed_here_in_the_readme_and_in_the_figures():
    assert sorted(path.name for path in BENCH.glob("bench_*.py")) == sorted(SMALLEST)
    readme = (BENCH.parent / "README.md").read_text(encoding="utf-8")
    figures = (BENCH.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert [name for name in SMALLEST if f"`{name}`" not in readme] == []
    assert [name for name in SMALLEST if f"bench/{name}" not in figures and f"`{name}`" not in figures] == []


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("script", sorted(SMALLEST))
def test_the_benchmark_runs_on_its_smallest_workload(script, tmp_path):
    if script in ("bench_remote.py", "bench_servers.py") and shutil.which("oxigraph") is None and not (Path(sys.executable).parent / "oxigraph").exists():
        pytest.skip(f"{script} needs the oxigraph server command (pip install oxigraph)")
    args = [arg.replace("{tmp}", str(tmp_path / "work")) for arg in SMALLEST[script]]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1100, check=False)
    assert result.returncode == 0, f"{script}: {result.stdout[-1500:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr

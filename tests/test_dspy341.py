"""The capture, source, session, serve and MCP tests again, on DSPy 3.4.1: in an environment of their own
(``.venv-dspy341`` at the root of the repository, built here on first use with ``pip install -e '.[test-tools]'
dspy==3.4.1`` and rebuilt when ``pyproject.toml`` changes), so that a change that breaks either DSPy fails the suite."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-dspy341"
DSPY = "3.4.1"
FILES = [
    "tests/test_real_dspy.py",
    "tests/test_capture.py",
    "tests/test_background.py",
    "tests/test_source_lm15.py",
    "tests/test_source_history_dict.py",
    "tests/test_source_openai.py",
    "tests/test_source_trajectory.py",
    "tests/test_analytics.py",
    "tests/test_derived.py",
    "tests/test_roundtrip.py",
    "tests/test_redact.py",
    "tests/test_paths.py",
    "tests/test_optimizer_lineage.py",
    "tests/test_sessions.py",
    "tests/test_serve.py",
    "tests/test_mcp.py",
]


def _environment() -> Path:
    """The DSPy 3.4.1 environment's Python, built or rebuilt as needed."""
    python = VENV / "bin" / "python"
    stamp = VENV / "dspy-rdf.stamp"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + DSPY.encode()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(VENV)],
        [str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[test-tools]", f"dspy=={DSPY}"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            pytest.fail(f"could not build the DSPy {DSPY} environment ({' '.join(step[:4])} ...): {done.stderr[-2000:]}")
    stamp.write_text(wanted)
    return python


@pytest.mark.slow
@pytest.mark.timeout(3600)  # building the environment and its own run of the files above
def test_capture_and_sources_pass_on_dspy_341():
    python = _environment()
    version = subprocess.run([str(python), "-c", "import dspy; print(dspy.__version__)"], capture_output=True, text=True, timeout=300)
    assert version.stdout.strip() == DSPY, version.stderr[-2000:]
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", *FILES],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, f"on DSPy {DSPY}: {summary}\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert " passed" in summary and "failed" not in summary

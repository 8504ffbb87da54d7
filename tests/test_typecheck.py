"""The package type-checks: ``mypy`` (configured in ``pyproject.toml``) finds no error in ``src/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # about 50 s of one core from a cold cache: in the README's full test command, not the default run
def test_mypy_finds_no_error_in_the_package(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    # a cache of its own: workers of the same run must not share one, and a stale cache must not hide an error
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout

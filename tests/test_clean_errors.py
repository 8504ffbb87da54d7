"""Every failure a user can cause or meet is one line on stderr, exit 2 (130 on Ctrl-C), no traceback, nothing stored
lost or half-written: each case run as the command runs, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA
from dspy_rdf.demo import bundled_traces_path

TRACE = DATA / "part_text.json"


def dspy_rdf(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The command as users run it."""
    return subprocess.run(
        [sys.executable, "-m", "dspy_rdf.cli", *args], cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, **(env or {})}, input=stdin, timeout=120,
    )  # fmt: skip


def one_line_error(result: subprocess.CompletedProcess, *, code: int = 2) -> str:
    """The one error line of a failed command (and that it is the only line, with no traceback)."""
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_an_upper_case_http_scheme_is_a_url_and_never_a_directory(tmp_path):
    result = dspy_rdf("stats", "--store", "HTTP://127.0.0.1:9", cwd=tmp_path, env={"DSPY_RDF_STORE_MAX_ATTEMPTS": "1"})
    assert "http://127.0.0.1:9/query" in one_line_error(result)
    assert list(tmp_path.iterdir()) == []  # no ./HTTP:/ directory


@pytest.mark.parametrize("url", ["ftp://host/store", "htp://host:7878", "file:///tmp/store"])
def test_a_url_of_another_scheme_is_refused(tmp_path, url):
    assert "a store is an http(s):// SPARQL server or a directory" in one_line_error(dspy_rdf("export", str(TRACE), "--store", url, cwd=tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["export", str(TRACE)], ["stats"], ["dump"], ["validate"]])
def test_a_directory_of_other_files_is_never_taken_for_a_store(tmp_path, command):
    unrelated = tmp_path / "photos"
    unrelated.mkdir()
    (unrelated / "cat.jpg").write_bytes(b"\xff\xd8")
    line = one_line_error(dspy_rdf(*command, "--store", str(unrelated), cwd=tmp_path))
    assert "not a dspy-rdf store" in line
    assert sorted(p.name for p in unrelated.iterdir()) == ["cat.jpg"]


def test_a_file_given_as_a_store_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    assert "is a file, not a store directory" in one_line_error(dspy_rdf("stats", "--store", "notes.txt", cwd=tmp_path))


def test_the_bundled_traces_export_into_an_empty_directory(tmp_path):
    (tmp_path / "store").mkdir()
    assert dspy_rdf("export", str(bundled_traces_path()), "--store", "store", cwd=tmp_path).returncode == 0

"""Shared fixtures: the real DSPy 3.3.1 fixture files and helpers to load them."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
PART_KINDS = ("text", "image", "audio", "video", "document", "binary", "tool_call", "tool_result", "thinking", "citation", "refusal")
WHOLE_FILES = ("request_all_parts.json", "response_all_parts.json", "history_entry_all_parts.json", "react_history.json")
FIXTURE_FILES = tuple(f"part_{kind}.json" for kind in PART_KINDS) + WHOLE_FILES


def pytest_report_header(config: pytest.Config) -> str:
    names = ("dspy", "linkml", "linkml-runtime", "rdflib", "pyshacl", "pyoxigraph")
    return "versions: " + ", ".join(f"{name} {version(name)}" for name in names)


def load(name: str):
    """The parsed JSON of a fixture file in tests/data/."""
    return json.loads((DATA / name).read_text(encoding="utf-8"))


@pytest.fixture(params=FIXTURE_FILES)
def fixture_json(request: pytest.FixtureRequest):
    """Each real DSPy 3.3.1 fixture file, as parsed JSON (one test case per file)."""
    return load(request.param)

# The fixture scripts in tests/data/ run under their own DSPy versions; they are not tests.
collect_ignore_glob = ["data/*.py"]

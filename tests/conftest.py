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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (the README's test command does)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow (the README's full test command does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> str:
    names = ("dspy", "linkml", "linkml-runtime", "rdflib", "pyshacl", "pyoxigraph")
    return "versions: " + ", ".join(f"{name} {version(name)}" for name in names)


def dspy33_types():
    """DSPy 3.3's typed LM objects (``dspy.core.types``), or a skip saying why on a DSPy that removed them (3.4)."""
    try:
        import dspy.core.types as types
    except ImportError:
        import dspy

        pytest.skip(f"DSPy {dspy.__version__} has no dspy.core.types (DSPy 3.3's typed LM objects)")
    return types


def load(name: str):
    """The parsed JSON of a fixture file in tests/data/."""
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def load_shared(name: str):
    """The parsed JSON of a fixture of ``shared/fixtures`` beside the repository (as CI provides it), or of its
    copy in tests/data/ when the repository was cloned on its own."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / name
    return json.loads((shared if shared.exists() else DATA / name).read_text(encoding="utf-8"))


@pytest.fixture(params=FIXTURE_FILES)
def fixture_json(request: pytest.FixtureRequest):
    """Each real DSPy 3.3.1 fixture file, as parsed JSON (one test case per file)."""
    return load(request.param)

# The fixture scripts in tests/data/ run under their own DSPy versions; they are not tests.
collect_ignore_glob = ["data/*.py"]


# --- a real Oxigraph server for the remote store tests (tests/test_store_remote.py, tests/test_store.py) -----------


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def oxigraph_server(tmp_path_factory: pytest.TempPathFactory):
    """The base URL of a real ``oxigraph serve`` (PyPI package ``oxigraph``) on 127.0.0.1, for the whole session."""
    import shutil
    import subprocess
    import sys
    import time

    import httpx

    binary = Path(sys.executable).with_name("oxigraph")
    command = str(binary) if binary.exists() else shutil.which("oxigraph")
    if command is None:
        pytest.fail("the oxigraph command is not installed: it is part of the test extra (pip install -e '.[test]')")
    port = _free_port()
    location = tmp_path_factory.mktemp("oxigraph-server")
    log = (location.parent / "oxigraph-server.log").open("wb")
    process = subprocess.Popen([command, "serve", "--location", str(location), "--bind", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"oxigraph serve exited with {process.returncode}; see {log.name}")
            try:
                if httpx.post(f"{url}/query", data={"query": "ASK {}"}, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"oxigraph serve did not answer on {url} within 30 s; see {log.name}")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def remote_store(oxigraph_server: str):
    """A :class:`dspy_rdf.store.remote.RemoteStore` on the session's Oxigraph server, emptied before each test."""
    from dspy_rdf.store.remote import RemoteStore

    store = RemoteStore(oxigraph_server, timeout=30, connect_timeout=5, max_attempts=2, backoff=0.05)
    store.update("CLEAR ALL")
    yield store
    store.close()

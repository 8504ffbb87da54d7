"""Shared fixtures: the real DSPy 3.3.1 fixture files and helpers to load them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

# Every test and every process it starts stays offline: LiteLLM (imported by DSPy) fetches its price list otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DATA = Path(__file__).parent / "data"
PART_KINDS = ("text", "image", "audio", "video", "document", "binary", "tool_call", "tool_result", "thinking", "citation", "refusal")
WHOLE_FILES = ("request_all_parts.json", "response_all_parts.json", "history_entry_all_parts.json", "react_history.json")
FIXTURE_FILES = tuple(f"part_{kind}.json" for kind in PART_KINDS) + WHOLE_FILES


DEFAULT_RUN_EXAMPLES = 0.25
"""The share of each property test's examples (hypothesis) the default run tries; ``--slow`` tries them all, and
``DSPY_RDF_HYPOTHESIS_FACTOR`` sets the share whatever the run (``10``: ten times as many)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (the README's test command does)")


def pytest_configure(config: pytest.Config) -> None:
    # before the test modules are imported, where the examples are counted (and in each worker process of -n)
    if not config.getoption("--slow"):
        os.environ.setdefault("DSPY_RDF_HYPOTHESIS_FACTOR", str(DEFAULT_RUN_EXAMPLES))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker more than the cores (at most four, as ``--maxprocesses``): many tests wait on a server or
    a child process, whose time another worker uses (on two cores, 5 min 18 s against 5 min 35 s to 5 min 54 s)."""
    return min(4, len(os.sched_getaffinity(0)) + 1) if hasattr(os, "sched_getaffinity") else min(4, (os.cpu_count() or 1) + 1)


def computed_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` (JSON) once per test run, whichever worker process asks first; the others read it (a module
    fixture is otherwise made again in every worker that runs one of its tests)."""
    if worker_id == "master":  # not under xdist: nothing to share
        return compute()
    from filelock import FileLock

    path = tmp_path_factory.getbasetemp().parent / f"{name}.json"  # the run's directory, shared by its workers
    with FileLock(f"{path}.lock"):
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        value = compute()
        path.write_text(json.dumps(value), encoding="utf-8")
        return value


def examples(count: int) -> int:
    """How many examples a property test written for ``count`` tries in this run (see :data:`DEFAULT_RUN_EXAMPLES`)."""
    return max(1, round(count * float(os.environ.get("DSPY_RDF_HYPOTHESIS_FACTOR", "1"))))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow (the README's full test command does)")
    on_virtuoso = pytest.mark.skip(reason="on Virtuoso: run with --slow (the README's full test command does; .ci/run installs Virtuoso)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
        elif _uses_virtuoso(item):  # a server of its own per worker, and its queries: a quarter of the default run's time
            item.add_marker(on_virtuoso)


VIRTUOSO_FIXTURES = frozenset({"virtuoso_server", "virtuoso_store", "virtuoso_capped"})


def _uses_virtuoso(item: pytest.Item) -> bool:
    """Whether a test runs on Virtuoso: it asks for one of its fixtures, or one of its parameters names it (a test
    that picks its store by name, ``request.getfixturevalue``)."""
    if VIRTUOSO_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any("virtuoso" in str(value) for value in callspec.params.values())


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


# --- real SPARQL servers for the remote store tests (tests/servers.py) ------------------------------------------


def started_or_skipped(start, *args, **kwargs):
    """A server from tests/servers.py, or a skip that says why it cannot run on this machine."""
    from servers import ServerUnavailable

    try:
        return start(*args, **kwargs)
    except ServerUnavailable as exc:
        pytest.skip(f"cannot run this server here: {exc}")


@pytest.fixture(scope="session")
def oxigraph_server(tmp_path_factory: pytest.TempPathFactory):
    """The base URL of a real ``oxigraph serve`` (PyPI package ``oxigraph``) on 127.0.0.1, for the whole session."""
    from servers import ServerUnavailable, start_oxigraph

    try:
        server = start_oxigraph(tmp_path_factory.mktemp("oxigraph-server"))
    except ServerUnavailable as exc:
        pytest.fail(str(exc))  # part of the test extra: never skipped
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def virtuoso_server(tmp_path_factory: pytest.TempPathFactory):
    """A real Virtuoso 7 (Debian's virtuoso-opensource) on 127.0.0.1 for the whole session, with its stock row cap
    (``ResultSetMaxRows = 10000``), a write user and a user without the ``SPARQL_UPDATE`` role; skipped, saying
    why, where Virtuoso is not installed (``.ci/run`` installs it)."""
    from servers import start_virtuoso

    server = started_or_skipped(start_virtuoso, tmp_path_factory.mktemp("virtuoso"), reader=True)
    yield server
    server.stop()


CAPPED_ROWS = 5
"""The row cap (``ResultSetMaxRows``) of :func:`virtuoso_capped`: fewer rows than any test store holds traces."""


@pytest.fixture(scope="session")
def virtuoso_capped(tmp_path_factory: pytest.TempPathFactory):
    """A second Virtuoso whose row cap is :data:`CAPPED_ROWS`: every listing must page."""
    from servers import start_virtuoso

    server = started_or_skipped(start_virtuoso, tmp_path_factory.mktemp("virtuoso-capped"), max_rows=CAPPED_ROWS)
    yield server
    server.stop()


def clear_traces(store) -> None:
    """Remove every trace graph of a remote store, and its ledger (never a server's own graphs)."""
    names = store.trace_iris() + store.ledger_entries()
    for start in range(0, len(names), 500):
        store.update(" ;\n".join(f"DROP SILENT GRAPH <{name}>" for name in names[start:start + 500]))


@pytest.fixture
def server_env(monkeypatch: pytest.MonkeyPatch):
    """Sets a server's credentials in the environment (where dspy-rdf reads them) for one test: ``server_env(server)``."""

    def apply(server) -> None:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)

    return apply


@pytest.fixture
def remote_store(oxigraph_server: str):
    """A :class:`dspy_rdf.store.remote.RemoteStore` on the session's Oxigraph server, emptied before each test."""
    from dspy_rdf.store.remote import RemoteStore

    store = RemoteStore(oxigraph_server, timeout=30, connect_timeout=5, max_attempts=2, backoff=0.05)
    store.update("CLEAR ALL")
    yield store
    store.close()


@pytest.fixture
def virtuoso_store(virtuoso_server, server_env):
    """A :class:`dspy_rdf.store.remote.RemoteStore` on the session's Virtuoso (digest authentication, credentials in
    the environment as users set them), its trace graphs removed before each test."""
    from dspy_rdf.store.remote import RemoteStore

    server_env(virtuoso_server)
    store = RemoteStore(virtuoso_server.url, timeout=60, connect_timeout=5, max_attempts=2, backoff=0.05)
    clear_traces(store)
    yield store
    store.close()

"""Stores and validation engines of other packages plug in the way the built-in ones do: by a URL scheme or an
engine name, registered from Python or by an installed package's entry points, and then reached from every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import DATA

from dspy_rdf.store import EmbeddedStore, StoreError, TraceStore, open_store, register_store, store_schemes

TRACE = DATA / "react_history.json"

PLUGIN_MODULE = '''
"""A user's store and engine, as a package of theirs would ship them."""
from pathlib import Path

from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import Severity, Violation


class ArchiveStore(EmbeddedStore):
    """An embedded store found by name under $ARCHIVE_ROOT: archive://team-a is $ARCHIVE_ROOT/team-a."""


def open_archive(url, *, read_only, create):
    import os

    return ArchiveStore(Path(os.environ["ARCHIVE_ROOT"]) / url.partition("://")[2], read_only=read_only, create=create)


class TraceCountEngine:
    """Finds one violation per trace that has no LM call count: a deliberately small rule set."""

    name = "trace-count"

    def validate(self, graphs, *, shapes, progress, workers, slices):
        import pyoxigraph as ox

        count = ox.NamedNode("https://w3id.org/lmodel/dspy/lm_call_count")
        found = []
        for name in graphs.names:
            quads = graphs.quads(name)
            if not any(q.predicate == count for q in quads):
                trace = graphs.label(name)
                found.append(Violation(focus_node=trace, path=None, value=None, constraint="trace-count",
                                       message="no lm_call_count", severity=Severity.VIOLATION, trace=trace))
            if progress is not None:
                progress(1)
        return found


def broken():
    raise RuntimeError("this plugin cannot start")
'''


def _install_plugin(site: Path, entry_points: str) -> None:
    """A package on ``site`` with the plugin module and the entry points given (what pip would install)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "archive_plugin.py").write_text(textwrap.dedent(PLUGIN_MODULE), encoding="utf-8")
    dist = site / "archive_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: archive-plugin\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")


def _cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dspy_rdf.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**os.environ, **env},
    )  # fmt: skip


class _Opened(EmbeddedStore):
    pass


def test_a_store_registered_from_python_is_opened_by_its_scheme(tmp_path):
    calls = []

    def open_team(url: str, *, read_only: bool, create: bool) -> TraceStore:
        calls.append((url, read_only, create))
        return _Opened(tmp_path / url.partition("://")[2], read_only=read_only, create=create)

    register_store("team", open_team)
    assert "team" in store_schemes()
    with open_store("TEAM://a", create=True) as store:
        assert isinstance(store, _Opened)
        assert store.stats()["traces"] == 0
    assert calls == [("TEAM://a", False, True)]


def test_a_scheme_must_be_a_scheme_and_an_opener_must_give_a_store(tmp_path):
    with pytest.raises(ValueError, match="not a URL scheme"):
        register_store("no scheme", lambda url, **_: None)
    register_store("notastore", lambda url, **_: object())
    with pytest.raises(StoreError, match="gave a object, not a TraceStore"):
        open_store("notastore://x")


def test_an_installed_plugin_store_is_reached_from_every_command_as_a_built_in_store_is(tmp_path):
    """Export, stats, query and validate through a plugin's scheme give what the same commands give on a directory."""
    site = tmp_path / "site"
    _install_plugin(site, "[dspy_rdf.stores]\narchive = archive_plugin:open_archive\n")
    env = {"PYTHONPATH": str(site), "ARCHIVE_ROOT": str(tmp_path / "archives")}
    answers = []
    for store in ("archive://team-a", str(tmp_path / "plain")):
        exported = _cli("export", str(TRACE), "--store", store, cwd=tmp_path, env=env)
        assert exported.returncode == 0, exported.stderr
        stats = _cli("stats", "--store", store, "--json", cwd=tmp_path, env=env)
        assert stats.returncode == 0, stats.stderr
        query = _cli("query", "tool_calls_per_tool", "--store", store, "--format", "json", cwd=tmp_path, env=env)
        assert query.returncode == 0, query.stderr
        validated = _cli("validate", "--store", store, cwd=tmp_path, env=env)
        assert validated.returncode == 0, validated.stdout + validated.stderr
        answers.append((json.loads(stats.stdout), query.stdout))
    assert (tmp_path / "archives" / "team-a" / "CURRENT").is_file()  # the plugin's store holds the traces
    assert answers[0] == answers[1] and answers[0][0]["traces"] == 1


def test_an_unknown_scheme_lists_the_installed_ones_and_a_broken_plugin_is_one_line(tmp_path):
    site = tmp_path / "site"
    _install_plugin(site, "[dspy_rdf.stores]\narchive = archive_plugin:open_archive\nbroken = archive_plugin:broken_missing\n")
    env = {"PYTHONPATH": str(site), "ARCHIVE_ROOT": str(tmp_path)}
    unknown = _cli("stats", "--store", "nosuch://x", cwd=tmp_path, env=env)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "or a URL of archive://, broken://" in unknown.stderr
    broken = _cli("stats", "--store", "broken://x", cwd=tmp_path, env=env)
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert broken.stderr.strip().splitlines() == [
        "error: the dspy_rdf.stores plugin 'broken' (archive_plugin:broken_missing) does not load: "
        "AttributeError: module 'archive_plugin' has no attribute 'broken_missing'"
    ]


def test_an_engine_registered_from_python_is_chosen_by_name_and_sees_each_trace(tmp_path):
    from dspy_rdf import read_traces
    from dspy_rdf.validation import Engine, FastEngine, engine_names, register_engine, validate_traces

    seen: list[str] = []

    class Recording(FastEngine):
        """The fast engine, noting the traces it is given: a wrapper a team might add for an audit log."""

        name = "recording"

        def validate(self, graphs, **options):
            seen.extend(graphs.names)
            return super().validate(graphs, **options)

    register_engine(Recording())
    assert engine_names()[:2] == [Engine.FAST, Engine.PYSHACL] and "recording" in engine_names()
    traces = [item.trace for item in read_traces(TRACE)]
    by_name = validate_traces(traces, engine="recording")
    builtin = validate_traces(traces, engine=Engine.FAST)
    assert by_name.conforms and by_name.validated == builtin.validated == len(seen) == len(traces)
    assert validate_traces(traces, engine=Recording()).violations == builtin.violations
    with pytest.raises(TypeError, match="not a validation engine"):
        register_engine(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no validation engine 'nosuch'; the engines are: fast, pyshacl"):
        validate_traces(traces, engine="nosuch")


def test_an_installed_plugin_engine_runs_from_the_command_line_with_the_report_of_a_built_in_engine(tmp_path):
    site = tmp_path / "site"
    _install_plugin(site, "[dspy_rdf.engines]\ntrace-count = archive_plugin:TraceCountEngine\nbroken = archive_plugin:nothing\n")
    env = {"PYTHONPATH": str(site)}
    good = tmp_path / "good.nq"
    assert _cli("export", str(TRACE), "-o", str(good), cwd=tmp_path, env=env).returncode == 0
    stripped = tmp_path / "stripped.nq"
    stripped.write_text("".join(line for line in good.read_text().splitlines(keepends=True) if "lm_call_count" not in line))

    conforms = _cli("validate", str(good), "--engine", "trace-count", "--format", "json", cwd=tmp_path, env=env)
    assert conforms.returncode == 0, conforms.stderr
    assert json.loads(conforms.stdout)["conforms"] is True
    failed = _cli("validate", str(stripped), "--engine", "trace-count", "--format", "json", cwd=tmp_path, env=env)
    assert failed.returncode == 1, failed.stderr
    report = json.loads(failed.stdout)
    assert [r["message"] for t in report["traces"] for r in t["results"]] == ["no lm_call_count"]
    assert report["traces_validated"] == 1

    unknown = _cli("validate", str(good), "--engine", "nosuch", cwd=tmp_path, env=env)
    assert unknown.returncode == 2 and unknown.stderr.strip() == "error: no validation engine 'nosuch'; the engines are: fast, pyshacl, broken, trace-count"
    broken = _cli("validate", str(good), "--engine", "broken", cwd=tmp_path, env=env)
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert "the dspy_rdf.engines plugin 'broken' (archive_plugin:nothing) does not load" in broken.stderr

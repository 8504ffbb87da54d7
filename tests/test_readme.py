"""Every example of the README works as written: each ``bash`` line and each ``python`` block is run, in order, in one
working directory holding the files the examples name, as a user would run them there (with ``--slow``: about forty
commands, each a process of its own). The opening install-and-demo command runs on a fresh clone (slow too); the full
test command is what ``.ci/run`` runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA

from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
OPENING = 2  # the install-and-demo command and the full test command
SERVER = "http://localhost:7878"  # the README's example server, replaced by a real one the tests start


def blocks() -> list[tuple[str, int, str]]:
    """(language, line, text) of every fenced block of the README."""
    out = []
    lines = README.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = re.match(r"^```(\w*)\s*$", lines[index])
        if match:
            end = next(n for n in range(index + 1, len(lines)) if lines[n].startswith("```"))
            out.append((match.group(1), index + 1, "\n".join(lines[index + 1:end])))
            index = end
        index += 1
    return out


def commands() -> list[tuple[int, str]]:
    """The README's shell commands after the opening two, one per line, with their line numbers."""
    out = []
    for language, line, text in blocks():
        if language == "bash":
            out += [(line + 1 + n, command) for n, command in enumerate(text.splitlines()) if command.strip()]
    return out[OPENING:]


def test_the_readme_has_the_examples_this_test_runs():
    languages = [language for language, _, _ in blocks()]
    assert languages.count("python") >= 4 and len(commands()) >= 20
    opening = [text for language, _, text in blocks() if language == "bash"][:OPENING]
    assert opening[0].endswith(".venv/bin/dspy-rdf demo") and opening[1].endswith("pytest --slow")
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1].endswith(opening[1].split("&& ", 1)[1])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A directory holding every file the examples name."""
    where = tmp_path_factory.mktemp("readme")
    history = json.loads((DATA / "history_dicts_dspy3.3.1.json").read_text(encoding="utf-8"))
    (where / "history.jsonl").write_text("".join(json.dumps(entry) + "\n" for entry in history), encoding="utf-8")
    shutil.copy(DATA / "openai_request_all_parts.json", where / "request.json")
    for name in ("runs.jsonl", "big.jsonl", "traces.jsonl"):
        shutil.copy(bundled_traces_path(), where / name)
    (where / "my.rq").write_text("SELECT (COUNT(*) AS ?quads) WHERE { GRAPH ?g { ?s ?p ?o } }\n", encoding="utf-8")
    assert main(["export", str(DATA / "react_history.json"), "-o", str(where / "more.nq")]) == 0
    (where / "tests").mkdir()
    (where / "tests" / "data").symlink_to(DATA)  # examples that name the repository's fixtures, as from a clone
    return where


def run_here(command: str | list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DSPY_RDF_STORE"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # dspy-rdf of this environment
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    shell = isinstance(command, str)
    return subprocess.run(command, shell=shell, executable="/bin/bash" if shell else None, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_every_readme_example_works_as_written(workdir, oxigraph_server):
    """The commands and Python blocks in README order (later ones use the stores and files earlier ones made)."""
    steps: list[tuple[int, str, str]] = []
    for language, line, text in blocks():
        if language == "bash":
            steps += [(line + 1 + n, "bash", command) for n, command in enumerate(text.splitlines()) if command.strip()]
        elif language == "python":
            steps.append((line, "python", text))
    bash_seen = 0
    for line, language, text in steps:
        if language == "bash":
            bash_seen += 1
            if bash_seen <= OPENING:
                continue  # the opening commands: below, and what .ci/run runs
            command = text.replace(".venv/bin/python", sys.executable).replace(SERVER, oxigraph_server)
            result = run_here(command, ROOT if "dspy_rdf.generate" in command else workdir)
            # 1 is a finding (a trace that does not conform, a warning with --fail-on warning), never an error
            assert result.returncode in (0, 1), f"README line {line}: {text}\n{result.stderr}"
            if "validate" not in command:
                assert result.returncode == 0, f"README line {line}: {text}\n{result.stderr}"
        else:
            result = run_here([sys.executable, "-c", text], workdir)
            assert result.returncode == 0, f"README block at line {line}:\n{result.stderr}"
        assert "Traceback" not in result.stderr and "error:" not in result.stderr, f"README line {line}: {text}\n{result.stderr}"
    assert (workdir / "report" / "index.html").is_file() and (workdir / "one.trig").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a fresh environment installed from the package registry
def test_the_opening_command_runs_the_demo_on_a_fresh_clone(tmp_path):
    """The README's first command, on a clone of the committed repository, with nothing installed beforehand."""
    clone = tmp_path / "dspy-rdf"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    opening = next(text for language, _, text in blocks() if language == "bash")
    result = run_here(opening, clone)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "exported 9 bundled DSPy 3.3.1 traces" in result.stdout and "all traces conform" in result.stdout

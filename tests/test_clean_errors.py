"""Every failure a user can cause or meet is one line on stderr, exit 2 (130 on Ctrl-C), no traceback, nothing stored
lost or half-written: each case run as the command runs, in a process of its own."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import DATA

from dspy_rdf.cli.demo import bundled_traces_path

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


# --- files -----------------------------------------------------------------------------------------------------


def limited_file_size(max_bytes: int):
    """A preexec_fn: the child may not write files larger than ``max_bytes`` (the kernel refuses with EFBIG, as a full
    disk refuses with ENOSPC: the same failed write)."""
    import resource
    import signal

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return apply


def test_a_full_disk_while_writing_an_output_file_is_one_line_and_leaves_the_old_file(tmp_path):
    out = tmp_path / "traces.nq"
    out.write_text("previous\n")
    result = subprocess.run(
        [sys.executable, "-m", "dspy_rdf.cli", "export", str(bundled_traces_path()), "-o", str(out)],
        cwd=tmp_path, capture_output=True, text=True, preexec_fn=limited_file_size(20_000), check=False,
    )  # fmt: skip
    assert one_line_error(result) == f"error: {out}: File too large"
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces.nq"]  # no temporary file left


def test_a_fifo_given_as_the_output_is_written_into_not_replaced(tmp_path):
    import threading

    fifo = tmp_path / "pipe.nq"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = dspy_rdf("export", str(TRACE), "-o", str(fifo), cwd=tmp_path)
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert b"urn:dspy-rdf:trace:" in received[0]
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["pipe.nq"]


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs a folder where no one may create files (sysfs)")
def test_a_folder_where_the_output_cannot_be_created_is_named_not_the_temporary_file(tmp_path):
    assert one_line_error(dspy_rdf("export", str(TRACE), "-o", "/sys/kernel/x.nq", cwd=tmp_path)) == "error: /sys/kernel/x.nq: Permission denied"


@pytest.mark.parametrize("output", ["-", pytest.param("/dev/stdout", marks=pytest.mark.slow)])
@pytest.mark.parametrize("command", [
    ["export", str(TRACE), "--format", "nq"], ["dump", "--store", "store"], ["prov", "--store", "store"], ["to-json", "x.nq"], ["to-otlp", "x.nq"],
])  # fmt: skip
def test_standard_output_as_the_output_is_written_directly_and_the_summary_goes_to_stderr(tmp_path, command, output):
    assert dspy_rdf("export", str(bundled_traces_path()), "--store", "store", cwd=tmp_path).returncode == 0
    assert dspy_rdf("export", str(TRACE), "-o", "x.nq", cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    result = dspy_rdf(*command, "-o", output, cwd=tmp_path)  # standard output is a pipe here, as in `| less`
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.startswith(("<", "{")) and "wrote" not in result.stdout and "dumped" not in result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and " trace(s) to " in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no file named "-", no temporary file


def test_several_traces_go_to_standard_output_as_json_lines(tmp_path):
    assert dspy_rdf("export", str(bundled_traces_path()), "-o", "all.nq", cwd=tmp_path).returncode == 0
    result = dspy_rdf("to-json", "all.nq", "-o", "-", cwd=tmp_path)
    assert result.returncode == 0
    traces = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(traces) == 9 and all(isinstance(trace, dict) for trace in traces)


def test_a_full_disk_while_storing_says_how_many_traces_were_written_and_a_rerun_completes(tmp_path):
    many = tmp_path / "many.jsonl"
    lines = bundled_traces_path().read_text(encoding="utf-8").splitlines()
    many.write_text("\n".join(line.replace('"uuid": "', f'"uuid": "{n}-') for n in range(300) for line in lines) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "dspy_rdf.cli", "export", str(many), "--store", "store"],
        cwd=tmp_path, capture_output=True, text=True, preexec_fn=limited_file_size(1_500_000), check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    first, second = result.stderr.strip().splitlines()
    assert first.startswith("error: ") and "were written to store before the failure" in second
    rerun = dspy_rdf("export", str(many), "--store", "store", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    written = int(second.split(" trace(s)")[0])
    assert ("resuming " in rerun.stderr) == (written > 0), (second, rerun.stderr)  # the journal of the failed run
    from dspy_rdf.inputs import read_traces
    from dspy_rdf.rdf.writer import trace_lines

    distinct = len({trace_lines(item.trace)[0] for item in read_traces(many)})
    assert json.loads(dspy_rdf("stats", "--json", "--store", "store", cwd=tmp_path).stdout)["traces"] == distinct


def test_a_failed_final_flush_still_prints_what_was_stored_then_one_error_line(tmp_path, monkeypatch, capsys):
    from dspy_rdf.cli.main import main
    from dspy_rdf.store import EmbeddedStore, StoreError

    def full_disk(self) -> None:  # what close() raises when RocksDB cannot write its files
        raise StoreError(f"flushing the store at {self.path} failed: IO error: No space left on device")

    monkeypatch.setattr(EmbeddedStore, "close", full_disk)
    assert main(["export", str(bundled_traces_path()), "--store", str(tmp_path / "store")]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("stored 9 trace(s)")
    assert err.count("\n") == 1 and "No space left on device" in err and "were committed" in err


@pytest.mark.parametrize(
    "command", [["export", str(TRACE), "-o", "out.nq"], ["to-json", "x.nq", "-o", "out.json"], ["dump", "--store", "store", "-o", "out.nq"]]
)
def test_an_output_that_is_a_directory_is_refused_before_any_work(tmp_path, command):
    (tmp_path / "x.nq").write_text("")
    (tmp_path / command[-1]).mkdir()
    dspy_rdf("export", str(TRACE), "--store", "store", cwd=tmp_path)
    assert f"{command[-1]} is a directory; give the name of a file to write" in one_line_error(dspy_rdf(*command, cwd=tmp_path))


def test_output_files_follow_the_umask_and_keep_the_mode_of_the_file_they_replace(tmp_path):
    result = subprocess.run(
        ["sh", "-c", f"umask 022 && {sys.executable} -m dspy_rdf.cli export {TRACE} -o new.nq"], cwd=tmp_path, capture_output=True, check=False
    )
    assert result.returncode == 0
    assert (tmp_path / "new.nq").stat().st_mode & 0o777 == 0o644
    (tmp_path / "shared.nq").write_text("")
    (tmp_path / "shared.nq").chmod(0o664)
    assert dspy_rdf("export", str(TRACE), "-o", "shared.nq", cwd=tmp_path).returncode == 0
    assert (tmp_path / "shared.nq").stat().st_mode & 0o777 == 0o664


def test_an_output_that_is_a_symlink_is_written_through_to_its_target(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "real.nq").write_text("old\n")
    (tmp_path / "link.nq").symlink_to(tmp_path / "data" / "real.nq")
    assert dspy_rdf("export", str(TRACE), "-o", "link.nq", cwd=tmp_path).returncode == 0
    assert (tmp_path / "link.nq").is_symlink()
    assert "urn:dspy-rdf:trace:" in (tmp_path / "data" / "real.nq").read_text()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["real.nq"]


# --- queries ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("demo")
    assert dspy_rdf("export", str(bundled_traces_path()), "--store", "store", cwd=where).returncode == 0
    return where / "store"


def test_a_service_call_that_fails_under_allow_federation_is_one_line(tmp_path, demo_store):
    query = "SELECT * WHERE { SERVICE <http://127.0.0.1:1/sparql> { ?s ?p ?o } }"
    line = one_line_error(dspy_rdf("query", "--store", str(demo_store), "--allow-federation", "--sparql", query, cwd=tmp_path))
    assert line.startswith("error: the SERVICE call to <http://127.0.0.1:1/sparql> failed on the store at")


def test_federation_is_refused_naming_the_flag_that_allows_it(tmp_path, demo_store):
    query = "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }"
    assert "--allow-federation" in one_line_error(dspy_rdf("query", "--store", str(demo_store), "--sparql", query, cwd=tmp_path))


def test_a_function_the_store_does_not_have_is_one_line(tmp_path, demo_store):
    query = "SELECT (<http://example.org/fn>(1) AS ?x) WHERE {}"
    assert "not supported" in one_line_error(dspy_rdf("query", "--store", str(demo_store), "--sparql", query, cwd=tmp_path))


def many_traces(path: Path, copies: int) -> Path:
    """A JSON Lines file of ``copies`` copies of the bundled traces, each copy with its own trace IRIs."""
    lines = bundled_traces_path().read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(line.replace('"uuid": "', f'"uuid": "{n}-') for n in range(copies) for line in lines) + "\n")
    return path


@pytest.fixture(scope="module")
def large_store(tmp_path_factory) -> Path:
    """A store of about 1,400 traces: enough for validate to run the fast engine in worker processes, for about two seconds."""
    where = tmp_path_factory.mktemp("large")
    assert dspy_rdf("export", str(many_traces(where / "many.jsonl", 200)), "--store", "store", cwd=where).returncode == 0
    return where / "store"


@pytest.mark.parametrize("command", [
    ["dump"], ["query", "longest_conversations", "--param", "limit=5000"],
    ["query", "longest_conversations", "--param", "limit=5000", "--format", "csv"],
    ["query", "longest_conversations", "--param", "limit=5000", "--format", "json"],
])  # fmt: skip
def test_a_broken_pipe_is_one_line_and_no_traceback_whatever_the_command(tmp_path, large_store, command):
    process = subprocess.Popen(
        [sys.executable, "-m", "dspy_rdf.cli", *command, "--store", str(large_store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdout.readline()  # like `| head -1`: read a line, then go away (the output is larger than the pipe)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 2
    assert "Traceback" not in err and err.strip().splitlines() == ["error: the output was closed before everything was written (broken pipe)"]


def with_default_signals() -> None:
    """A preexec_fn: Ctrl-C and SIGTERM as in a terminal (a suite started in the background of a shell passes SIGINT
    on ignored), and a process group of its own, so that a signal can go to the command and its workers together,
    as a terminal sends Ctrl-C."""
    import signal

    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize("signal_name, code, word", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_ctrl_c_or_sigterm_exits_without_a_traceback_and_leaves_no_partial_output(tmp_path, signal_name, code, word):
    import signal
    import time

    many_traces(tmp_path / "many.jsonl", 2000)
    process = subprocess.Popen(
        [sys.executable, "-m", "dspy_rdf.cli", "export", "many.jsonl", "-o", "out.nq"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=with_default_signals,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.name.startswith(".out.nq.") for p in tmp_path.iterdir()):
        time.sleep(0.02)  # until it writes its temporary file
    process.send_signal(getattr(signal, signal_name))
    out, err = process.communicate(timeout=60)
    assert process.returncode == code and b"Traceback" not in err and err.decode().strip() == word
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.jsonl"]


# What the console script `dspy-rdf` runs (its entry point, pyproject.toml's [project.scripts]), with a Ctrl-C sent to the process itself the moment it starts importing
# MODULE: at that precise point of the start, whatever the speed of the machine.
CTRL_C_WHILE_IMPORTING = """
import os, signal, sys

MODULE = sys.argv.pop(1)

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == MODULE:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
from dspy_rdf.cli.launch import main
sys.exit(main())
"""


@pytest.mark.parametrize("module", ["dspy_rdf.cli.main", "dspy_rdf.cli.console", "dspy_rdf.outputs", "contextlib", "argparse", "dspy_rdf.cli.parser", "dspy_rdf.canonical.identity", "dspy_rdf.store"])
def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path, demo_store, module):
    result = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_IMPORTING, module, "stats", "--store", str(demo_store)], cwd=tmp_path,
        capture_output=True, text=True, preexec_fn=with_default_signals, timeout=60, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (130, "interrupted\n")


def children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def validate_and_signal(tmp_path: Path, store: Path, send: Callable[[subprocess.Popen, list[int]], None]) -> tuple[int, str, str]:
    """Run ``validate --store`` in a process group of its own; once its two worker processes have validated for a
    moment, ``send`` signals to the group or to the workers; return the exit code, stdout and stderr."""
    import signal
    import time

    process = subprocess.Popen(
        [sys.executable, "-m", "dspy_rdf.cli", "validate", "--store", str(store)], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=with_default_signals,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline and len(children(process.pid)) < 2:
            time.sleep(0.01)
        workers = [int(pid) for pid in children(process.pid)]
        assert len(workers) == 2, "the workers did not start"
        time.sleep(0.3)  # the workers are validating
        send(process, workers)
        out, err = process.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, out.decode(), err.decode()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the worker processes in /proc (Linux)")
@pytest.mark.parametrize("presses", [1, 2, 3])
def test_ctrl_c_pressed_again_while_validating_in_worker_processes_neither_hangs_nor_prints_a_traceback(tmp_path, large_store, presses):
    import signal
    import time

    def ctrl_c(process: subprocess.Popen, workers: list[int]) -> None:
        for _ in range(presses):  # as a terminal sends Ctrl-C: to the command and its workers
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
            time.sleep(0.1)

    code, out, err = validate_and_signal(tmp_path, large_store, ctrl_c)
    assert (code, err) == (130, "interrupted\n")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the worker processes in /proc (Linux)")
def test_workers_leave_ctrl_c_to_the_command_that_started_them(tmp_path, large_store):
    import signal

    def ctrl_c_to_the_workers(process: subprocess.Popen, workers: list[int]) -> None:
        for pid in workers:
            os.kill(pid, signal.SIGINT)

    code, out, err = validate_and_signal(tmp_path, large_store, ctrl_c_to_the_workers)
    assert (code, err) == (0, "")
    assert out.startswith("conforms: ") and out.strip().endswith("no violations")


# --- secrets in messages -----------------------------------------------------------------------------------------

KEY = "sk-proj-" + "Abcdefghij1234567890KLMNOPqrstuvwxyz_ABCDEFGHIJ"
KEYED_IRI = f"urn:x:{KEY}"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> Path:
    """A folder with a store (``store``), a store whose path is a secret, and an RDF file (``x.nq``)."""
    where = tmp_path_factory.mktemp("keyed")
    for target in (["--store", "store"], ["--store", KEY], ["-o", "x.nq"]):
        assert dspy_rdf("export", str(TRACE), *target, cwd=where).returncode == 0
    return where


@pytest.mark.parametrize("command", [
    ["delete", KEYED_IRI, "--store", "store"],
    ["dump", "--trace", KEYED_IRI, "--store", "store"],
    ["validate", "--trace", KEYED_IRI, "--store", "store"],
    ["validate", "x.nq", "--trace", KEYED_IRI],
    ["to-otlp", "--trace", KEYED_IRI, "--store", "store", "-o", "out.json"],
    ["query", "longest_conversations", "--param", f"limit={KEY}", "--store", "store"],
    ["query", "tool_calls_per_tool", "--format", KEY, "--store", "store"],
    ["export", str(TRACE), "-o", "out.nq", "--base", KEY],
    ["export", str(TRACE), "--store", f"new-{KEY}"],
    ["stats", "--store", KEY],
    ["to-json", "x.nq", "-o", f"{KEY}.json"],
    ["report", "--store", "store", "--out", f"report-{KEY}"],
    ["demo", "--store", f"demo-{KEY}"],
])  # fmt: skip
def test_no_message_of_any_command_shows_a_secret(keyed, command):
    result = dspy_rdf(*command, cwd=keyed)
    said = result.stdout + result.stderr
    assert KEY not in said and "[REDACTED:openai_api_key]" in said, said


def test_messages_follow_the_redaction_options_of_the_command(keyed):
    kept = dspy_rdf("export", str(TRACE), "--store", f"plain-{KEY}", "--no-redact", cwd=keyed)
    assert kept.returncode == 0 and f"in plain-{KEY}" in kept.stdout
    own = dspy_rdf("export", str(TRACE), "--store", "hunter2-store", "--redact-pattern", "pw=hunter2", cwd=keyed)
    assert own.returncode == 0 and "in [REDACTED:pw]-store" in own.stdout


# --- inputs, objects ---------------------------------------------------------------------------------------------


def test_a_secret_quoted_in_an_error_message_is_redacted(tmp_path):
    key = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
    bad = tmp_path / "bad.jsonl"
    entry = {"messages": [{"role": "user", "content": "hi"}], "outputs": ["ok"], "timestamp": f"not-a-date {key}", "model": "m"}
    bad.write_text(json.dumps(entry) + "\n")
    result = dspy_rdf("export", str(bad), "-o", "out.nq", cwd=tmp_path)
    assert "skipped" in result.stderr and "bad.jsonl:1" in result.stderr
    assert key not in result.stderr + result.stdout and "[REDACTED:openai_api_key]" in result.stderr


def test_json_files_that_start_with_a_byte_order_mark_are_read(tmp_path):
    text = TRACE.read_text(encoding="utf-8")
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", " ").encode("utf-8") + b"\n")
    result = dspy_rdf("export", "bom.json", "bom.jsonl", "-o", "out.nq", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("wrote 1 trace(s) to out.nq (nq); 1 duplicate(s)")


def test_a_byte_that_is_not_utf8_after_a_byte_order_mark_is_counted_from_the_start_of_the_file(tmp_path):
    (tmp_path / "bad.json").write_bytes(b'\xef\xbb\xbf{"a": \xff}')
    assert "bad.json: not UTF-8 text (byte 10)" in dspy_rdf("export", "bad.json", "-o", "out.nq", cwd=tmp_path).stderr


@pytest.mark.parametrize("content", ["", "\n", "\n\n  \n"])
def test_an_empty_json_file_is_said_to_be_empty_at_no_line(tmp_path, content):
    (tmp_path / "empty.json").write_text(content)
    result = dspy_rdf("export", "empty.json", "-o", "out.nq", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == "skipped empty.json: empty: the file holds no JSON value"


def test_duplicate_keys_in_a_json_object_are_refused_naming_the_key_and_the_line(tmp_path):
    data = tmp_path / "dup.jsonl"
    line = (DATA / "part_text.json").read_text().replace("\n", " ")
    data.write_text(line + "\n" + line.replace('{', '{"model": "a", "model": "b", ', 1) + "\n")
    result = dspy_rdf("export", str(data), "-o", "out.nq", cwd=tmp_path)
    assert result.returncode == 1
    assert "dup.jsonl:2: the key 'model' appears twice in one JSON object" in result.stderr
    assert "wrote 1 trace(s)" in result.stdout


def test_stores_and_store_sinks_close_twice_and_a_closed_store_says_so(tmp_path):
    from dspy_rdf.capture.recorder import StoreSink
    from dspy_rdf.store import EmbeddedStore, StoreError

    store = EmbeddedStore(tmp_path / "s")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.stats()
    sink = StoreSink(tmp_path / "t")
    sink.close()
    sink.close()


def test_read_traces_takes_a_path_given_as_text(tmp_path):
    from dspy_rdf.inputs import read_traces

    assert [item.trace is not None for item in read_traces(str(bundled_traces_path()))] == [True] * 9


@pytest.mark.parametrize("command", [["export", str(TRACE)], ["stats"], ["dump"], ["validate"], ["report", "--out", "r"], ["query", "part_kinds"]])
def test_store_takes_an_optional_value_on_every_command(tmp_path, command):
    env = {"DSPY_RDF_STORE": str(tmp_path / "default")}
    assert dspy_rdf("export", str(bundled_traces_path()), "--store", cwd=tmp_path, env=env).returncode == 0
    result = dspy_rdf(*command, "--store", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr


def test_an_export_whose_every_input_fails_leaves_the_output_file_as_it_was(tmp_path):
    output = tmp_path / "out.nq"
    assert dspy_rdf("export", str(TRACE), "-o", str(output), cwd=tmp_path).returncode == 0
    before = output.read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    result = dspy_rdf("export", str(bad), "-o", str(output), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{output} was left as it was" in result.stderr
    assert output.read_bytes() == before


def test_an_output_file_that_is_one_of_the_inputs_is_refused(tmp_path):
    source = tmp_path / "runs.jsonl"
    source.write_text(TRACE.read_text(encoding="utf-8").replace("\n", " ") + "\n")
    before = source.read_bytes()
    assert "is one of the inputs" in one_line_error(dspy_rdf("export", str(source), "--format", "nq", "-o", str(source), cwd=tmp_path))
    assert source.read_bytes() == before


def test_delete_on_a_store_that_does_not_exist_creates_none(tmp_path):
    missing = tmp_path / "no-store"
    assert "no store at" in one_line_error(dspy_rdf("delete", "https://example.org/t", "--store", str(missing), cwd=tmp_path))
    assert not missing.exists()


@pytest.mark.parametrize("command", [["delete", "urn:x:missing"], ["dump", "--trace", "urn:x:missing"],
                                     ["validate", "--trace", "urn:x:missing"], ["to-otlp", "--trace", "urn:x:missing", "-o", "out.json"]])
def test_a_trace_that_is_not_in_the_store_is_the_same_error_for_every_command(tmp_path, demo_store, command):
    line = one_line_error(dspy_rdf(*command, "--store", str(demo_store), cwd=tmp_path))
    assert line == f"error: no trace urn:x:missing in the store at {demo_store}"


def test_delete_deletes_the_traces_that_are_there_and_names_the_others_as_errors(tmp_path):
    assert dspy_rdf("export", str(TRACE), "--store", "store", cwd=tmp_path).returncode == 0
    iri = dspy_rdf("dump", "--store", "store", cwd=tmp_path).stdout.splitlines()[0].split()[-2].strip("<>")  # its graph
    result = dspy_rdf("delete", "urn:x:missing", iri, "--store", "store", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (2, f"deleted {iri}\n", "error: no trace urn:x:missing in the store at store\n")


def test_demo_help_offers_no_server_url(tmp_path):
    help_text = " ".join(dspy_rdf("demo", "--help", cwd=tmp_path).stdout.split())
    assert "--store [PATH]" in help_text and "URL" not in help_text


def test_a_report_folder_given_as_a_symlink_is_written_through_the_link(tmp_path, demo_store):
    (tmp_path / "reports").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "reports")
    result = dspy_rdf("report", "--store", str(demo_store), "--out", "link", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link").is_symlink() and (tmp_path / "reports" / "index.html").is_file()
    assert dspy_rdf("report", "--store", str(demo_store), "--out", "link", cwd=tmp_path).returncode == 0  # and replaced


def test_delete_of_something_that_is_not_an_iri_says_so(tmp_path, demo_store):
    assert "is not a trace IRI" in one_line_error(dspy_rdf("delete", "sha256-8b30357e", "--store", str(demo_store), cwd=tmp_path))


def test_a_mistyped_sparql_file_name_is_said_to_be_missing(tmp_path, demo_store):
    line = one_line_error(dspy_rdf("query", "--sparql", "myy.rq", "--store", str(demo_store), cwd=tmp_path))
    assert "myy.rq: no such file" in line


def test_query_without_a_name_or_sparql_says_neither_was_given(tmp_path, demo_store):
    assert "neither was given" in one_line_error(dspy_rdf("query", "--store", str(demo_store), cwd=tmp_path))


@pytest.mark.parametrize("command, took, write", [
    (["query", "--store", "tool_calls_per_tool"], "tool_calls_per_tool", "the query name"),
    (["delete", "--store", "urn:x:abc"], "urn:x:abc", "the trace IRI"),
    (["export", "--store", "x.nq"], "x.nq", "the files"),
    (["validate", "--store", "x.nq"], "x.nq", "the files"),
    (["to-otlp", "-o", "out.json", "--store", "x.nq"], "x.nq", "the files"),
])  # fmt: skip
def test_a_positional_argument_taken_by_store_is_said_to_be_so(tmp_path, command, took, write):
    (tmp_path / "x.nq").write_text("")
    line = one_line_error(dspy_rdf(*command, cwd=tmp_path))
    assert line.endswith(f": --store took {took!r} as the store; write {write} before --store, or --store=PATH"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.nq"]


def test_a_store_that_exists_is_not_taken_for_a_missing_positional_argument(tmp_path, demo_store):
    result = dspy_rdf("delete", "--store", str(demo_store), cwd=tmp_path)
    assert result.returncode == 2 and "the following arguments are required: TRACE" in result.stderr and "--store took" not in result.stderr


def test_to_json_of_several_traces_into_a_json_file_is_refused_and_says_to_use_jsonl(tmp_path):
    rdf = tmp_path / "all.trig"
    assert dspy_rdf("export", str(bundled_traces_path()), "-o", str(rdf), cwd=tmp_path).returncode == 0
    line = one_line_error(dspy_rdf("to-json", str(rdf), "-o", "all.json", cwd=tmp_path))
    assert "write them to a .jsonl file" in line
    assert not (tmp_path / "all.json").exists()
    assert dspy_rdf("to-json", str(rdf), "-o", "all.jsonl", cwd=tmp_path).returncode == 0


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the worker processes in /proc (Linux)")
def test_the_worker_processes_of_validate_die_with_it_when_it_is_killed(tmp_path, large_store):
    import signal
    import time

    left: list[int] = []

    def kill_the_command(process: subprocess.Popen, workers: list[int]) -> None:
        os.kill(process.pid, signal.SIGKILL)  # no handler runs: only the kernel can end the workers now
        left.extend(workers)

    validate_and_signal(tmp_path, large_store, kill_the_command)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid) for pid in left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left and not [pid for pid in left if Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)]


def _state(pid: int) -> str:
    try:
        return next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:")).lower()
    except (OSError, StopIteration):
        return "gone"

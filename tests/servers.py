"""Real SPARQL servers on 127.0.0.1 for the tests and the benchmarks: ``oxigraph serve`` (PyPI package ``oxigraph``)
and Virtuoso 7 (Debian package ``virtuoso-opensource``), each in a directory of its own, on free ports.

:func:`start_virtuoso` never touches the system database: its ``virtuoso.ini`` puts every file in the given directory.
It creates a write user (``SPARQL_UPDATE`` role) and, if asked, a user without that role, and can lower Virtuoso's row
cap (``ResultSetMaxRows``) to test paging. :class:`ServerUnavailable` says why a server cannot run here.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

VIRTUOSO_USER = "dspyrdf"
VIRTUOSO_PASSWORD = "dspyrdf-Test-Pw1"
VIRTUOSO_READER = "dspyrdf_reader"
VIRTUOSO_READER_PASSWORD = "dspyrdf-Reader-Pw2"
VIRTUOSO_VSP = Path("/var/lib/virtuoso-opensource-7/vsp")


class ServerUnavailable(RuntimeError):
    """The server cannot be started on this machine; the message says why."""


def environment(venv: Path, requirement: str) -> Path:
    """A Python environment of its own holding ``requirement`` (pip requirements, space-separated), built on first
    use and again when the requirement changes: for servers and producers that pin packages of their own."""
    stamp = venv / "dspy-rdf.stamp"
    if stamp.exists() and stamp.read_text(encoding="utf-8") == requirement:
        return venv
    steps = [[sys.executable, "-m", "venv", "--clear", str(venv)], [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *requirement.split()]]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900, check=False)
        except subprocess.TimeoutExpired:
            raise ServerUnavailable(f"{' '.join(step[:4])} ... took more than 15 minutes") from None
        if done.returncode != 0:
            raise ServerUnavailable(f"{' '.join(step[:4])} ... failed: {done.stderr[-1000:]}")
    stamp.write_text(requirement, encoding="utf-8")
    return venv


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    """A running server process: ``url`` is what ``--store`` takes; ``env`` the credentials to write to it."""

    name: str
    url: str
    process: subprocess.Popen
    directory: Path
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    sql_port: int | None = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def isql(self, statements: str, timeout: float = 300) -> str:
        """Run SQL statements with Virtuoso's ``isql-vt`` as ``dba``; return its output (raise on failure)."""
        if self.sql_port is None:
            raise ValueError(f"{self.name} has no SQL port")
        done = subprocess.run(
            [_virtuoso_binary("isql-vt"), f"127.0.0.1:{self.sql_port}", "dba", "dba", f"exec={statements}"],
            capture_output=True, text=True, timeout=timeout, check=False,
        )
        if done.returncode != 0 or "*** Error" in done.stdout + done.stderr:
            raise RuntimeError(f"isql-vt failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
        return done.stdout


def _wait_until_answering(process: subprocess.Popen, query_url: str, log: Path, name: str, seconds: float) -> None:
    wait_until_ready(process, lambda: httpx.post(query_url, data={"query": "ASK {}"}, timeout=2).status_code == 200, query_url, log, name, seconds)


def wait_until_ready(process: subprocess.Popen, ready: Callable[[], bool], where: str, log: Path, name: str, seconds: float, poll: float = 0.1) -> None:
    """Return once ``ready()`` holds (a connection refused is not ready yet); a server that exits or stays unready for
    ``seconds`` raises :class:`ServerUnavailable` (the latter killed) naming ``where`` and its log."""
    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            raise ServerUnavailable(f"{name} exited with {process.returncode}; see {log}")
        try:
            if ready():
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise ServerUnavailable(f"{name} did not answer on {where} within {seconds:.0f} s; see {log}")
        time.sleep(poll)


def oxigraph_command() -> str:
    """The ``oxigraph`` command of this environment (the test extra installs it)."""
    binary = Path(sys.executable).with_name("oxigraph")
    command = str(binary) if binary.exists() else shutil.which("oxigraph")
    if command is None:
        raise ServerUnavailable("the oxigraph command is not installed: it is part of the test extra (pip install -e '.[test]')")
    return command


def start_oxigraph(directory: Path) -> Server:
    """``oxigraph serve`` on a free port with its store in ``directory`` (created)."""
    command = oxigraph_command()
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = directory.parent / f"{directory.name}.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [command, "serve", "--location", str(directory / "db"), "--bind", f"127.0.0.1:{port}"], stdout=handle, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    _wait_until_answering(process, f"{url}/query", log, "oxigraph serve", 30)
    return Server("oxigraph", url, process, directory, log)


def _virtuoso_binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ServerUnavailable(
            f"{name} is not installed (Debian: apt-get install virtuoso-opensource; .ci/run installs it where it can)"
        )
    return found


def virtuoso_ini(
    directory: Path, *, http_port: int, sql_port: int, max_rows: int = 10_000, sorted_rows: int = 1_000_000, buffers: int = 20_000,
    cost_limit: int = 0,
) -> str:
    """A ``virtuoso.ini`` that keeps every file of the server in ``directory``: the settings docs/remote-stores.md lists."""
    d = directory
    return f"""[Database]
DatabaseFile = {d}/virtuoso.db
ErrorLogFile = {d}/virtuoso.log
LockFile = {d}/virtuoso.lck
TransactionFile = {d}/virtuoso.trx
xa_persistent_file = {d}/virtuoso.pxa
[TempDatabase]
DatabaseFile = {d}/virtuoso-temp.db
TransactionFile = {d}/virtuoso-temp.trx
[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DisableUnixSocket = 1
DirsAllowed = ., {d}
NumberOfBuffers = {buffers}
MaxDirtyBuffers = {buffers * 3 // 4}
CheckpointInterval = 60
MaxSortedTopRows = {sorted_rows}
[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerRoot = {VIRTUOSO_VSP}
ServerThreads = 10
[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryExecutionTime = 600
MaxQueryCostEstimationTime = {cost_limit}
"""


def start_virtuoso(directory: Path, *, max_rows: int = 10_000, buffers: int = 20_000, reader: bool = False, cost_limit: int = 0) -> Server:
    """Virtuoso 7 (``virtuoso-t``) on free ports with its database in ``directory`` (created), a write user with the
    ``SPARQL_UPDATE`` role (and, with ``reader``, a user without it); ``url`` is the authenticated endpoint and
    ``env`` the variables that make dspy-rdf write through it (digest authentication)."""
    binary = _virtuoso_binary("virtuoso-t")
    _virtuoso_binary("isql-vt")
    if not VIRTUOSO_VSP.is_dir():
        raise ServerUnavailable(f"{VIRTUOSO_VSP} is missing (part of Debian's virtuoso-opensource)")
    directory.mkdir(parents=True, exist_ok=True)
    http_port, sql_port = free_port(), free_port()
    while sql_port == http_port:
        sql_port = free_port()
    ini = directory / "virtuoso.ini"
    ini.write_text(virtuoso_ini(directory, http_port=http_port, sql_port=sql_port, max_rows=max_rows, buffers=buffers, cost_limit=cost_limit), encoding="utf-8")
    log = directory / "console.log"
    with log.open("wb") as handle:
        process = subprocess.Popen([binary, "+configfile", str(ini), "+foreground"], cwd=directory, stdout=handle, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{http_port}"
    server = Server("virtuoso", f"{base}/sparql-auth", process, directory, log, sql_port=sql_port)
    try:
        _wait_until_answering(process, f"{base}/sparql", log, "virtuoso-t", 120)
        statements = f"DB.DBA.USER_CREATE ('{VIRTUOSO_USER}', '{VIRTUOSO_PASSWORD}'); GRANT SPARQL_UPDATE TO \"{VIRTUOSO_USER}\";"
        if reader:
            statements += f" DB.DBA.USER_CREATE ('{VIRTUOSO_READER}', '{VIRTUOSO_READER_PASSWORD}'); GRANT SPARQL_SELECT TO \"{VIRTUOSO_READER}\";"
        server.isql(statements)
    except BaseException:
        server.stop()
        raise
    server.env = {
        "DSPY_RDF_STORE_AUTH": "digest",
        "DSPY_RDF_STORE_USER": VIRTUOSO_USER,
        "DSPY_RDF_STORE_PASSWORD": VIRTUOSO_PASSWORD,
    }
    return server

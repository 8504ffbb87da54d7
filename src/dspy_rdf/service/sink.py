"""A capture sink that sends each finished run as OpenTelemetry spans to an OTLP/HTTP receiver: ``dspy-rdf serve``
(so the store is not locked by the program, and every other command can query it meanwhile), or any other receiver
(Phoenix, MLflow, a collector)."""

from __future__ import annotations

import queue
import threading
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.redact import DEFAULT_REDACTOR, Redactor
from dspy_rdf.capture.base import Sink
from dspy_rdf.capture.runs import RecordedRun
from dspy_rdf.interop.otlp import OtlpPushError, push_otlp, shown_url, traces_url
from dspy_rdf.rdf.writer import stored_form

__all__ = ["OtlpSink"]

_BATCH = 64  # runs sent in one request at most


class OtlpSink(Sink):
    """Sends each run a :class:`~dspy_rdf.capture.TraceRecorder` finishes to ``endpoint`` (``http://127.0.0.1:4318``
    for a local ``dspy-rdf serve``; a URL without a path gets ``/v1/traces``) as OTLP/protobuf, from a thread of its
    own, so the program does not wait for the network. Secrets are redacted before anything leaves the process, as a
    store would redact them. ``headers`` go with each request (``{"Authorization": "Bearer ..."}`` for a server
    that asks for a token) and are never shown. A run the receiver did not take goes back to the recorder, which keeps
    it in ``unwritten`` and reports it in ``errors``."""

    def __init__(
        self,
        endpoint: str = "http://127.0.0.1:4318",
        *,
        headers: dict[str, str] | None = None,
        protocol: str = "protobuf",
        timeout: float = 30.0,
        redactor: Redactor | None = DEFAULT_REDACTOR,
    ) -> None:
        self.url = traces_url(endpoint)
        self.headers = dict(headers or {})
        self.protocol = protocol
        self.timeout = timeout
        self.redactor = redactor
        self._queue: queue.Queue[m.Trace | None] = queue.Queue()
        self._pending = 0
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="dspy-rdf OTLP sink", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"OtlpSink({shown_url(self.url)!r})"

    def write(self, run: m.Trace | RecordedRun) -> None:
        """Queue one finished run for sending."""
        if not isinstance(run, m.Trace):
            raise TypeError("OtlpSink takes built runs (Trace), not recorded ones")
        with self._done:
            self._pending += 1
        self._queue.put(run)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every run written so far has been sent (or given back as unwritten)."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Send what is queued, then stop the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def __enter__(self) -> OtlpSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            item = self._queue.get()
            batch: list[m.Trace] = []
            while True:
                if item is None:
                    stopping = True
                    break
                batch.append(item)
                if len(batch) >= _BATCH or self._queue.empty():
                    break
                item = self._queue.get()
            if batch:
                self._send(batch)

    def _send(self, batch: list[m.Trace]) -> None:
        pairs: list[tuple[str, m.Trace]] = []
        originals: dict[str, m.Trace] = {}  # what goes back to the recorder is the run as it gave it
        failed: list[tuple[m.Trace, str]] = []
        for trace in batch:
            try:
                iri, written, _ = stored_form(trace, redactor=self.redactor)
                pairs.append((iri, written))
                originals[iri] = trace
            except ValueError as exc:
                failed.append((trace, str(exc)))
        try:
            report: Any = push_otlp(pairs, self.url, headers=self.headers, protocol=self.protocol, timeout=self.timeout) if pairs else None
            refused = {iri: str(exc) for iri, exc in report.refused} if report else {}
            if report and report.rejected_spans:
                reason = f"the receiver rejected {report.rejected_spans} span(s): {'; '.join(report.rejections)[:300]}"
                failed += [(originals[iri], reason) for iri, _ in pairs]
            else:
                failed += [(originals[iri], refused[iri]) for iri, _ in pairs if iri in refused]
        except (OtlpPushError, ImportError, OSError) as exc:
            failed += [(originals[iri], str(exc)) for iri, _ in pairs]
        for trace, reason in failed:
            if self.on_failure is not None:
                self.on_failure(trace, reason)
        with self._done:
            self._pending -= len(batch)
            self._done.notify_all()

"""OTLP/HTTP trace export requests -> the OTLP JSON exports the spool keeps, and the answers a receiver gives.

A request body is an ``ExportTraceServiceRequest`` as protobuf (``application/x-protobuf``) or as OTLP/JSON
(``application/json``), optionally gzipped (``Content-Encoding: gzip``). Each span is read here, once, as ``export
--from otlp`` reads it (:func:`dspy_rdf.sources.otlp.spans_from_otlp`); the spans it cannot read are left out of what
is kept and counted in the OTLP partial-success answer, with the first reason, so a sender learns what was refused
while the rest of the export is kept. What is kept goes to the spool as the request came (unzipped), tagged with its
encoding, and is read again only after a restart (:func:`spans_of_record`).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from enum import Enum
from typing import Any

from dspy_rdf.canonical.errors import DspyRdfError, TraceInputError
from dspy_rdf.inputs import parse_json
from dspy_rdf.sources.otlp import spans_from_otlp, spans_from_proto
from dspy_rdf.sources.spans import Span

__all__ = [
    "MAX_BODY_BYTES",
    "Encoding",
    "ReadSpan",
    "Received",
    "ReceiverError",
    "decode_request",
    "export_response",
    "spans_of_record",
]

ReadSpan = tuple[str, Span | TraceInputError, set[str], str]
"""One span as :func:`~dspy_rdf.sources.otlp.spans_from_otlp` reads it: trace id, span, resource keys, scope."""

_TAGS = {b"P": "protobuf", b"J": "json"}  # the first byte of a spool record: how the rest is encoded

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body taken, before and after gunzip (an OTLP exporter sends about 512 spans at once)."""

MISSING_PROTO = "OTLP/protobuf needs opentelemetry-proto: pip install 'dspy-rdf[otlp]' (or send OTLP/JSON)"


class Encoding(str, Enum):
    """The OTLP/HTTP encodings a receiver takes, by content type."""

    PROTOBUF = "application/x-protobuf"
    JSON = "application/json"


class ReceiverError(DspyRdfError, ValueError):
    """A request the receiver refuses as a whole, with the HTTP status to answer."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Received:
    """One export request as read: the spans that could be read, the spool record that holds them (the request as it
    came, or, when spans were refused, the others as OTLP/JSON), how many spans were refused and why the first was."""

    spans: list[ReadSpan]
    record: bytes
    rejected_spans: int
    reason: str

    @property
    def accepted_spans(self) -> int:
        """How many spans were taken."""
        return len(self.spans)


def _encoding(content_type: str) -> Encoding:
    media = content_type.split(";")[0].strip().lower()
    if media in ("application/x-protobuf", "application/protobuf"):
        return Encoding.PROTOBUF
    if media == "application/json":
        return Encoding.JSON
    raise ReceiverError(
        f"unsupported Content-Type {media or '(none)'!r}: send application/x-protobuf or application/json", status=415
    )


def _gunzip(body: bytes, limit: int) -> bytes:
    reader = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = reader.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ReceiverError(f"the body is not valid gzip: {exc}", status=400) from None
    if len(data) > limit:
        raise ReceiverError(f"the body is larger than {limit} bytes once unzipped", status=413)
    return data


def _from_protobuf(body: bytes) -> Any:
    """The ``ExportTraceServiceRequest`` message of a protobuf body."""
    try:
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        raise ReceiverError(MISSING_PROTO, status=415) from None
    try:
        return ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise ReceiverError(f"the body is not an OTLP ExportTraceServiceRequest: {exc}", status=400) from None


def _as_json(export: Any) -> dict[str, Any]:
    """An export as OTLP JSON: a protobuf message in protobuf's JSON mapping (ids as base64, which the reader takes)."""
    if isinstance(export, dict):
        return export
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    return MessageToDict(export)


def _read_spans(export: Any) -> tuple[list[ReadSpan], list[str]]:
    """The spans of an export (OTLP JSON, or a protobuf message) that can be read, and why each other one cannot."""
    accepted: list[ReadSpan] = []
    rejected: list[str] = []
    try:
        for read in spans_from_otlp(export) if isinstance(export, dict) else spans_from_proto(export):
            if isinstance(read[1], TraceInputError):
                rejected.append(str(read[1]))
            else:
                accepted.append(read)
    except TraceInputError as exc:  # a span whose trace id cannot be read, or a broken envelope: nothing is taken
        raise ReceiverError(f"the export cannot be read: {exc}", status=400) from None
    return accepted, rejected


def _kept(export: Any, tag: bytes, body: bytes) -> Received:
    """The spans of the export that can be read, and the record that keeps them."""
    accepted, rejected = _read_spans(export)
    if not rejected:
        return Received(accepted, tag + body, 0, "")
    kept = _without_unreadable_spans(_as_json(export))
    # ASCII: a string may hold a lone surrogate (JSON's "\ud800"), which UTF-8 cannot encode
    return Received(accepted, b"J" + json.dumps(kept).encode("ascii"), len(rejected), rejected[0])


def _without_unreadable_spans(export: dict[str, Any]) -> dict[str, Any]:
    """The export with each span that cannot be read on its own taken out (read again, span by span)."""
    out = dict(export)
    key = "resourceSpans" if "resourceSpans" in export else "resource_spans"
    resource_spans = []
    for rs in export.get(key) or []:
        rs = dict(rs)
        scope_key = next((k for k in ("scopeSpans", "scope_spans", "instrumentationLibrarySpans") if k in rs), "scopeSpans")
        scopes = []
        for ss in rs.get(scope_key) or []:
            ss = dict(ss)
            good = []
            for span in ss.get("spans") or []:
                probe = {key: [{**rs, scope_key: [{**ss, "spans": [span]}]}]}
                if all(not isinstance(s, TraceInputError) for _, s, _, _ in spans_from_otlp(probe)):
                    good.append(span)
            ss["spans"] = good
            scopes.append(ss)
        rs[scope_key] = scopes
        resource_spans.append(rs)
    out[key] = resource_spans
    return out


def decode_request(body: bytes, content_type: str, content_encoding: str = "", *, limit: int = MAX_BODY_BYTES) -> tuple[Encoding, Received]:
    """Read one OTLP/HTTP export request; :class:`ReceiverError` (with the HTTP status) when it is refused whole."""
    encoding = _encoding(content_type)
    if len(body) > limit:
        raise ReceiverError(f"the body is larger than {limit} bytes", status=413)
    coding = content_encoding.strip().lower()
    if coding == "gzip":
        body = _gunzip(body, limit)
    elif coding not in ("", "identity"):
        raise ReceiverError(f"unsupported Content-Encoding {coding!r}: send gzip or nothing", status=415)
    export = _decode(encoding, body)
    return encoding, _kept(export, b"P" if encoding is Encoding.PROTOBUF else b"J", body)


def _decode(encoding: Encoding, body: bytes, *, strict: bool = True) -> Any:
    """The export a body holds. ``strict``: JSON read as a file's line is (a key given twice, NaN: refused), so the
    same bytes give the same answer by HTTP and from a file; a spool record, acknowledged once (perhaps by a release
    that read JSON leniently), is read again leniently, so that what was acknowledged is stored."""
    if encoding is Encoding.PROTOBUF:
        return _from_protobuf(body)
    if strict:
        if not body.removeprefix(b"\xef\xbb\xbf").strip():
            raise ReceiverError("the body is empty: send an OTLP/JSON export (an object with resourceSpans)", status=400)
        try:
            export = parse_json(body, "the body")
        except TraceInputError as exc:
            raise ReceiverError(str(exc), status=400) from None
    else:
        try:
            export = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ReceiverError(f"the record is not JSON: {exc}", status=400) from None
    if not isinstance(export, dict):
        raise ReceiverError("the body is not an OTLP/JSON export (an object with resourceSpans)", status=400)
    if not export:
        export = {"resourceSpans": []}  # an export of nothing, as an empty protobuf request is
    return export


def spans_of_record(record: bytes) -> list[ReadSpan]:
    """The spans a spool record keeps (a restart reads them again); ReceiverError for a record this receiver did not
    write."""
    tag = _TAGS.get(record[:1])
    if tag is None:
        raise ReceiverError(f"a spool record tagged {record[:1]!r} is not one this receiver wrote", status=500)
    spans, _ = _read_spans(_decode(Encoding.PROTOBUF if tag == "protobuf" else Encoding.JSON, record[1:], strict=False))
    return spans


def export_response(encoding: Encoding, received: Received | None = None) -> bytes:
    """The ``ExportTraceServiceResponse`` body: empty on full success, else the partial success (rejected spans and
    the reason), encoded as the request was."""
    rejected = received.rejected_spans if received else 0
    reason = received.reason if received else ""
    if encoding is Encoding.JSON:
        doc: dict[str, Any] = {}
        if rejected:
            doc["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": reason}
        return json.dumps(doc).encode("utf-8")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = reason
    return response.SerializeToString()

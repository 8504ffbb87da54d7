"""Regenerate ``genai_semconv_examples.json``: the spans of the OpenTelemetry GenAI semantic conventions' own examples
(``docs/gen-ai/non-normative/examples-llm-calls.md``), as OTLP/JSON.

    python tests/data/otlp/make_fixtures_genai_spec.py /path/to/open-telemetry/semantic-conventions

The conventions moved to a repository of their own; the examples are read from the last commit of
``open-telemetry/semantic-conventions`` that holds them (:data:`COMMIT`, the parent of the move). Each example (a
``###`` subsection with span tables, else a ``##`` section) becomes one trace; each table of span attributes in it one span (its properties and the JSON values it links to, as the
document gives them), in document order, one second apart; the section of multimodal parts, which gives only the input
and output messages, one ``chat`` span holding them.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMMIT = "c9e48b1d1af565454b73b9e14f0841bca4670ada^"
DOC = "docs/gen-ai/non-normative/examples-llm-calls.md"
START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def _jsonc(text: str) -> object:
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def _value(value: object) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return {"arrayValue": {"values": [{"stringValue": v} for v in value]}}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": json.dumps(value, ensure_ascii=False)}  # structured values as JSON text, as SDKs record them


def _hex(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:digits]


def _split(text: str, level: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(rf"^{level} ([^\n]+)\n(.*?)(?=^{level} |\Z)", text, flags=re.M | re.S)]


def sections(doc: str) -> list[tuple[str, str]]:
    """The examples: each ``###`` subsection that has tables of span attributes, else each ``##`` section."""
    out = []
    for title, body in _split(doc, "##"):
        parts = [(f"{title}: {sub}", text) for sub, text in _split(body, "###") if "| Property" in text]
        out += parts or [(title, body)]
    return out


def spans_of(title: str, body: str) -> list[tuple[str, dict]]:
    blocks = {m.group(1): _jsonc(m.group(2)) for m in re.finditer(r'<span id="([^"]+)">.*?```jsonc?\n(.*?)```', body, flags=re.S)}
    out = []
    for table in re.findall(r"\| Property .*?\n((?:\|.*\n)+)", body):
        name, attributes = None, {}
        for row in table.splitlines()[1:]:
            cells = [c.strip() for c in row.strip("|").split("|")]
            key, value = cells[0], cells[1]
            anchor = re.search(r"\(#([^)]+)\)", value)
            parsed = blocks[anchor.group(1)] if anchor else json.loads(value.strip("`"))
            if key == "Span name":
                name = parsed
            elif key.startswith("`"):
                attributes[key.strip("`")] = parsed
        if name is not None:  # the other tables describe events
            out.append((name, attributes))
    if not out:
        found = [_jsonc(m) for m in re.findall(r"```jsonc\n(.*?)```", body, flags=re.S)]
        if len(found) == 2:
            out.append(("chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": found[0], "gen_ai.output.messages": found[1]}))
    return out


def main(checkout: Path) -> None:
    doc = subprocess.run(["git", "-C", str(checkout), "show", f"{COMMIT}:{DOC}"], check=True, capture_output=True, text=True).stdout
    resource_spans = []
    for title, body in sections(doc):
        spans = []
        trace_id = _hex(title, 32)
        for i, (name, attributes) in enumerate(spans_of(title, body)):
            spans.append({
                "traceId": trace_id,
                "spanId": _hex(f"{title}/{i}", 16),
                "name": name,
                "kind": 1 if attributes.get("gen_ai.operation.name") == "execute_tool" else 3,
                "startTimeUnixNano": str(START_NS + i * 10**9),
                "endTimeUnixNano": str(START_NS + i * 10**9 + 5 * 10**8),
                "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
                "status": {},
            })
        if spans:
            resource_spans.append({"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": f"semantic-conventions {title}"}, "spans": spans}]})
    (HERE / "genai_semconv_examples.json").write_text(json.dumps({"resourceSpans": resource_spans}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote genai_semconv_examples.json ({len(resource_spans)} traces)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""RDF -> model: rebuild traces from the quads :mod:`dspy_rdf.rdf.writer` wrote (in any RDF format).

Reading is strict: a node of an unexpected class, a literal of the wrong datatype, a missing required
value, a property the schema does not give that class, or positions that are not 0..n-1 raise
:class:`~dspy_rdf.canonical.errors.RdfInputError` naming the node and the property.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal, overload

import pyoxigraph as ox

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.errors import RdfInputError
from dspy_rdf.canonical.schema_tables import CLASS_SLOTS
from dspy_rdf.rdf import vocab as v

__all__ = ["is_ledger_graph", "traces_from_quads"]

_TYPE = v.RDF_TYPE
_CANONICAL_DATETIME = re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):\d\d:\d\d(?:\.\d{0,5}[1-9])?Z?")
_DSPY = v.DSPY
_PART_BY_CLASS = {v.class_iri(cls.__name__): cls for cls in m.PART_CLASSES.values()}
_SLOT_BY_IRI = {v.slot_iri(name): name for name in ("name", "description")}

Node = dict[str, list[Any]]


def _slot(pred: str) -> str | None:
    if pred in _SLOT_BY_IRI:
        return _SLOT_BY_IRI[pred]
    if pred.startswith(_DSPY):
        return pred[len(_DSPY):]
    return None


class _Graph:
    """Triples of one trace, grouped by subject, with typed accessors that fail with a located error."""

    def __init__(self, source: str) -> None:
        self.nodes: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        self.types: dict[str, str] = {}
        self.source = source

    def add(self, s: str, p: str, o: Any) -> None:
        if p == _TYPE:
            if isinstance(o, ox.NamedNode):
                if s in self.types and self.types[s] != o.value:
                    raise self.error(s, p, f"has two classes, {self.types[s]} and {o.value}")
                self.types[s] = o.value
            return
        slot = _slot(p)
        if slot is None:
            raise self.error(s, p, "property is not part of the dspy schema")
        self.nodes[s][slot].append(o)

    def error(self, node: str, prop: str, message: str) -> RdfInputError:
        return RdfInputError(message, source=self.source, node=node, prop=prop)

    # --- accessors -------------------------------------------------------------------------------

    def node(self, iri: str, cls: str) -> dict[str, list[Any]]:
        actual = self.types.get(iri)
        if actual != v.class_iri(cls):
            raise self.error(iri, _TYPE, f"expected a dspy:{cls}, found {actual or 'no rdf:type'}")
        return self.nodes.get(iri, {})

    def one(self, iri: str, props: Node, slot: str, *, required: bool = False) -> Any:
        values = props.get(slot)
        if not values:
            if required:
                raise self.error(iri, v.slot_iri(slot), "required value is missing")
            return None
        if len(values) > 1:
            raise self.error(iri, v.slot_iri(slot), f"expected one value, found {len(values)}")
        return values[0]

    def literal(self, iri: str, props: Node, slot: str, datatype: str, *, required: bool = False) -> Any:
        term = self.one(iri, props, slot, required=required)
        if term is None:
            return None
        if not isinstance(term, ox.Literal):
            raise self.error(iri, v.slot_iri(slot), f"expected a literal, found {term}")
        if term.datatype.value != datatype:
            raise self.error(iri, v.slot_iri(slot), f"expected datatype <{datatype}>, found <{term.datatype.value}>")
        if datatype == v.XSD_DATETIME and not _CANONICAL_DATETIME.fullmatch(m.canonical_datetime(term.value)):
            raise self.error(iri, v.slot_iri(slot), f"{term.value!r} is not a date-time of the years 1 to 9999 (in UTC), which a trace keeps")
        return term.value

    @overload
    def string(self, iri: str, props: Node, slot: str, *, required: Literal[True]) -> str: ...
    @overload
    def string(self, iri: str, props: Node, slot: str, *, required: bool = False) -> str | None: ...
    def string(self, iri: str, props: Node, slot: str, *, required: bool = False) -> str | None:
        return self.literal(iri, props, slot, v.XSD_STRING, required=required)

    def integer(self, iri: str, props: Node, slot: str, *, required: bool = False) -> int | None:
        text = self.literal(iri, props, slot, v.XSD_INTEGER, required=required)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            raise self.error(iri, v.slot_iri(slot), f"{text!r} is not an integer") from None

    def decimal(self, iri: str, props: Node, slot: str) -> float | None:
        text = self.literal(iri, props, slot, v.XSD_DECIMAL)
        if text is None:
            return None
        if not _DECIMAL.fullmatch(text):
            raise self.error(iri, v.slot_iri(slot), f"{text!r} is not a decimal number")
        return float(text)

    @overload
    def boolean(self, iri: str, props: Node, slot: str, *, default: bool) -> bool: ...
    @overload
    def boolean(self, iri: str, props: Node, slot: str, *, default: None = None) -> bool | None: ...
    def boolean(self, iri: str, props: Node, slot: str, *, default: bool | None = None) -> bool | None:
        text = self.literal(iri, props, slot, v.XSD_BOOLEAN)
        if text is None:
            return default
        if text not in ("true", "false", "1", "0"):
            raise self.error(iri, v.slot_iri(slot), f"{text!r} is not a boolean")
        return text in ("true", "1")

    def json(self, iri: str, props: Node, slot: str, *, default: Any = None) -> Any:
        text = self.literal(iri, props, slot, v.RDF_JSON)
        if text is None:
            return default() if default in (dict, list) else default
        try:
            return json.loads(text)
        except ValueError as exc:
            raise self.error(iri, v.slot_iri(slot), f"rdf:JSON literal is not valid JSON ({exc})") from None

    def children(self, iri: str, props: Node, slot: str) -> list[str]:
        """The IRIs a multivalued slot points at, in ``dspy:position`` order (which must be 0..n-1)."""
        items = []
        for term in props.get(slot, ()):
            if not isinstance(term, ox.NamedNode):
                raise self.error(iri, v.slot_iri(slot), f"expected an IRI, found {term}")
            child = term.value
            position = self.integer(child, self.nodes.get(child, {}), "position", required=True)
            items.append((position, child))
        items.sort()
        if [p for p, _ in items] != list(range(len(items))):
            raise self.error(iri, v.slot_iri(slot), f"positions are {[p for p, _ in items]}, expected 0..{len(items) - 1}")
        return [child for _, child in items]

    @overload
    def child(self, iri: str, props: Node, slot: str, *, required: Literal[True]) -> str: ...
    @overload
    def child(self, iri: str, props: Node, slot: str, *, required: bool = False) -> str | None: ...
    def child(self, iri: str, props: Node, slot: str, *, required: bool = False) -> str | None:
        term = self.one(iri, props, slot, required=required)
        if term is None:
            return None
        if not isinstance(term, ox.NamedNode):
            raise self.error(iri, v.slot_iri(slot), f"expected an IRI, found {term}")
        return term.value

    def check_slots(self, iri: str, props: Node, allowed: frozenset[str]) -> None:
        extra = props.keys() - allowed
        if extra:
            slot = sorted(extra)[0]
            raise self.error(iri, v.slot_iri(slot), "property is not allowed on this class")

    # --- classes ------------------------------------------------------------------------------------

    def trace(self, iri: str) -> m.Trace:
        p = self.node(iri, "Trace")
        self.check_slots(iri, p, _TRACE_SLOTS)
        kind = self.string(iri, p, "source_kind", required=True)
        if kind not in m.SOURCE_KINDS:
            raise self.error(iri, v.slot_iri("source_kind"), f"unknown source kind {kind!r}")
        source_format = self.string(iri, p, "source_format") or "dspy33"
        if source_format not in m.SOURCE_FORMATS:
            raise self.error(iri, v.slot_iri("source_format"), f"unknown source format {source_format!r}")
        trace = m.Trace(
            source_kind=kind,
            source_format=source_format,
            source_index=self.integer(iri, p, "source_index"),
            dspy_version=self.string(iri, p, "dspy_version"),
            source_trace_id=self.string(iri, p, "source_trace_id"),
            session_id=self.string(iri, p, "session_id"),
            user_id=self.string(iri, p, "user_id"),
            started_at=self.literal(iri, p, "started_at", v.XSD_DATETIME),
            ended_at=self.literal(iri, p, "ended_at", v.XSD_DATETIME),
            redactions=self.json(iri, p, "redactions", default=dict),
            losses=self.json(iri, p, "losses", default=list),
            content_digest=self.string(iri, p, "content_digest"),
        )
        trace.entries = [self.entry(c) for c in self.children(iri, p, "entries")]
        if (req := self.child(iri, p, "request")) is not None:
            trace.request = self.request(req)
        if (resp := self.child(iri, p, "response")) is not None:
            trace.response = self.response(resp)
        trace.messages = [self.message(c) for c in self.children(iri, p, "messages")]
        trace.parts = [self.part(c) for c in self.children(iri, p, "parts")]
        call_iris = self.children(iri, p, "calls")
        index = {call: i for i, call in enumerate(call_iris)}
        trace.calls = [self.call(c, iri, index) for c in call_iris]
        expected = m.CONTENT_SLOT[kind]
        if kind == "lm_history_entry" and len(trace.entries) != 1:
            raise self.error(iri, v.slot_iri("entries"), f"a {kind} trace holds exactly one entry, found {len(trace.entries)}")
        if kind == "lm_part" and len(trace.parts) != 1:
            raise self.error(iri, v.slot_iri("parts"), f"a {kind} trace holds exactly one part, found {len(trace.parts)}")
        if kind == "lm_message" and len(trace.messages) != 1:
            raise self.error(iri, v.slot_iri("messages"), f"a {kind} trace holds exactly one message, found {len(trace.messages)}")
        for slot in (expected, "response") if kind == "request_response" else (expected,):
            if getattr(trace, slot) is None:
                raise self.error(iri, v.slot_iri(slot), f"a {kind} trace needs its {slot}")
        return trace

    def message(self, iri: str) -> m.LMMessage:
        p = self.node(iri, "LMMessage")
        self.check_slots(iri, p, CLASS_SLOTS["LMMessage"])
        return m.LMMessage(
            role=self.string(iri, p, "role", required=True),
            parts=[self.part(c) for c in self.children(iri, p, "parts")],
            name=self.string(iri, p, "name"),
            metadata=self.json(iri, p, "metadata", default=dict),
        )

    def call(self, iri: str, trace_iri: str, index: dict[str, int]) -> m.Call:
        cls = self.types.get(iri, "")
        kind = cls[len(_DSPY):] if cls.startswith(_DSPY) else ""
        if kind not in _CALL_SLOTS:
            names = ", ".join(f"dspy:{name}" for name in _CALL_SLOTS)
            raise self.error(iri, _TYPE, f"expected one of {names}, found {cls or 'no rdf:type'}")
        p = self.nodes.get(iri, {})
        self.check_slots(iri, p, _CALL_SLOTS[kind])
        common: dict[str, Any] = {
            "started_at": self.literal(iri, p, "started_at", v.XSD_DATETIME, required=True),
            "ended_at": self.literal(iri, p, "ended_at", v.XSD_DATETIME),
            "dspy_call_id": self.string(iri, p, "dspy_call_id"),
            "parent_call": self.call_index(iri, p, "parent_call", index),
            "error": self.string(iri, p, "error"),
        }
        if kind == "ModuleCall":
            usage = self.child(iri, p, "usage")
            return m.ModuleCall(
                module_class=self.string(iri, p, "module_class", required=True),
                module_class_path=self.string(iri, p, "module_class_path"),
                usage=None if usage is None else self.usage(usage),
                input_summary=self.json(iri, p, "input_summary"),
                output_summary=self.json(iri, p, "output_summary"),
                tool_calls=[self.tool_call_part(c) for c in self.children(iri, p, "tool_calls")],
                returned_tool_calls=sorted(
                    (self.part_ref(iri, trace_iri, target, "returned_tool_calls") for target in self.iris(iri, p, "returned_tool_calls")),
                    key=m.PartRef.order,
                ),
                **common,
            )
        if kind == "EvaluateCall":
            return m.EvaluateCall(
                metric=self.string(iri, p, "metric"),
                program_class=self.string(iri, p, "program_class"),
                program_fingerprint=self.string(iri, p, "program_fingerprint"),
                devset_size=self.integer(iri, p, "devset_size"),
                score=self.decimal(iri, p, "score"),
                example_results=[self.example_result(c, index) for c in self.children(iri, p, "example_results")],
                **common,
            )
        if kind == "CompileCall":
            return m.CompileCall(
                optimizer_class=self.string(iri, p, "optimizer_class", required=True),
                input_summary=self.json(iri, p, "input_summary"),
                program_class=self.string(iri, p, "program_class"),
                student_fingerprint=self.string(iri, p, "student_fingerprint"),
                program_fingerprint=self.string(iri, p, "program_fingerprint"),
                candidates=self.candidates(iri, p),
                training_examples=[self.training_example(c) for c in self.children(iri, p, "training_examples")],
                **common,
            )
        if kind == "LMCall":
            entry = self.child(iri, p, "entry")
            return m.LMCall(model=self.string(iri, p, "model"), entry=None if entry is None else self.entry(entry), **common)
        tc_iri = self.child(iri, p, "tool_call", required=True)
        tc = self.node(tc_iri, "ToolCall")
        self.check_slots(tc_iri, tc, CLASS_SLOTS["ToolCall"])
        pairing = self.string(iri, p, "pairing")
        if pairing is not None and pairing not in _PAIRINGS:
            raise self.error(iri, v.slot_iri("pairing"), f"expected one of {', '.join(_PAIRINGS)}, found {pairing!r}")
        execution = m.ToolExecution(
            tool_call=m.ToolCall(
                name=self.string(tc_iri, tc, "name", required=True),
                call_id=self.string(tc_iri, tc, "call_id"),
                args=self.json(tc_iri, tc, "args", default=dict),
            ),
            decided_by=self.call_index(iri, p, "decided_by", index),
            pairing=pairing,
            **common,
        )
        if (r := self.child(iri, p, "tool_result")) is not None:
            rp = self.node(r, "ToolResult")
            self.check_slots(r, rp, CLASS_SLOTS["ToolResult"])
            execution.tool_result = m.ToolResult(
                name=self.string(r, rp, "name"),
                call_id=self.string(r, rp, "call_id"),
                result=self.json(r, rp, "result"),
                is_error=self.boolean(r, rp, "is_error"),
                error=self.string(r, rp, "error"),
                provider_data=self.json(r, rp, "provider_data", default=dict),
                metadata=self.json(r, rp, "metadata", default=dict),
            )
        if (answers := self.child(iri, p, "answers")) is not None:
            execution.answers = self.part_ref(iri, trace_iri, answers, "answers")
        return execution

    def part_ref(self, iri: str, trace_iri: str, target: str, slot: str) -> m.PartRef:
        match = _PART_REF.fullmatch(target[len(trace_iri):]) if target.startswith(trace_iri) else None
        if match is None:
            raise self.error(iri, v.slot_iri(slot), f"<{target}> is not a tool-call part of this run")
        call, output, part = match.group("call", "output", "part")
        return m.PartRef(call=int(call), output=None if output is None else int(output), part=int(part))

    def iris(self, iri: str, props: Node, slot: str) -> list[str]:
        """The IRIs an unordered multivalued slot points at."""
        out = []
        for term in props.get(slot, ()):
            if not isinstance(term, ox.NamedNode):
                raise self.error(iri, v.slot_iri(slot), f"expected an IRI, found {term}")
            out.append(term.value)
        return out

    def example_result(self, iri: str, index: dict[str, int]) -> m.ExampleResult:
        p = self.node(iri, "ExampleResult")
        self.check_slots(iri, p, CLASS_SLOTS["ExampleResult"])
        return m.ExampleResult(
            example=self.json(iri, p, "example"),
            prediction=self.json(iri, p, "prediction"),
            score=self.decimal(iri, p, "score"),
            program_call=self.call_index(iri, p, "program_call", index),
            error=self.string(iri, p, "error"),
        )

    def training_example(self, iri: str) -> m.TrainingExample:
        p = self.node(iri, "TrainingExample")
        self.check_slots(iri, p, CLASS_SLOTS["TrainingExample"])
        return m.TrainingExample(example=self.json(iri, p, "example"))

    def candidates(self, iri: str, props: Node) -> list[m.ProgramCandidate]:
        """A compilation's candidates, each parent named by its index among them (an earlier or later one alike)."""
        nodes = self.children(iri, props, "candidates")
        position = {node: i for i, node in enumerate(nodes)}
        out = []
        for node in nodes:
            p = self.node(node, "ProgramCandidate")
            self.check_slots(node, p, CLASS_SLOTS["ProgramCandidate"])
            parents = []
            for parent in self.iris(node, p, "parent_candidates"):
                if parent not in position:
                    raise self.error(node, v.slot_iri("parent_candidates"), f"<{parent}> is not a candidate of this compilation")
                parents.append(position[parent])
            out.append(m.ProgramCandidate(
                program_fingerprint=self.string(node, p, "program_fingerprint", required=True),
                parent_candidates=sorted(parents),
                state_changes=self.json(node, p, "state_changes"),
                score=self.decimal(node, p, "score"),
            ))  # fmt: skip
        return out

    def call_index(self, iri: str, props: Node, slot: str, index: dict[str, int]) -> int | None:
        target = self.child(iri, props, slot)
        if target is None:
            return None
        if target not in index:
            raise self.error(iri, v.slot_iri(slot), f"<{target}> is not a call of this run")
        return index[target]

    def entry(self, iri: str) -> m.LMHistoryEntry:
        p = self.node(iri, "LMHistoryEntry")
        self.check_slots(iri, p, _ENTRY_SLOTS)
        return m.LMHistoryEntry(
            request=self.request(self.child(iri, p, "request", required=True)),
            response=self.response(self.child(iri, p, "response", required=True)),
            timestamp=self.literal(iri, p, "timestamp", v.XSD_DATETIME, required=True),
            uuid=self.string(iri, p, "uuid", required=True),
            model_type=self.string(iri, p, "model_type"),
            extra_fields=self.json(iri, p, "extra_fields", default=dict),
        )

    def request(self, iri: str) -> m.LMRequest:
        p = self.node(iri, "LMRequest")
        self.check_slots(iri, p, CLASS_SLOTS["LMRequest"])
        messages = [self.message(child) for child in self.children(iri, p, "messages")]
        tools = []
        for child in self.children(iri, p, "tools"):
            tp = self.node(child, "LMToolSpec")
            self.check_slots(child, tp, _TOOL_SLOTS)
            tool_type = self.string(child, tp, "tool_type", required=True)
            if tool_type != "function":
                raise self.error(child, v.slot_iri("tool_type"), f"expected 'function', found {tool_type!r}")
            tools.append(
                m.LMToolSpec(
                    name=self.string(child, tp, "name", required=True),
                    description=self.string(child, tp, "description"),
                    parameters=self.json(child, tp, "parameters", default=dict),
                    strict=self.boolean(child, tp, "strict"),
                    metadata=self.json(child, tp, "metadata", default=dict),
                    provider_data=self.json(child, tp, "provider_data", default=dict),
                )
            )
        config_iri = self.child(iri, p, "config")
        return m.LMRequest(
            model=self.string(iri, p, "model", required=True),
            messages=messages,
            tools=tools,
            config=m.LMConfig() if config_iri is None else self.config(config_iri),
            metadata=self.json(iri, p, "metadata", default=dict),
        )

    def config(self, iri: str) -> m.LMConfig:
        p = self.node(iri, "LMConfig")
        self.check_slots(iri, p, _CONFIG_SLOTS)
        c = m.LMConfig(
            temperature=self.decimal(iri, p, "temperature"),
            max_tokens=self.integer(iri, p, "max_tokens"),
            top_p=self.decimal(iri, p, "top_p"),
            stop=self.json(iri, p, "stop"),
            n=self.integer(iri, p, "n"),
            logprobs=self.json(iri, p, "logprobs"),
            response_format=self.json(iri, p, "response_format"),
            extensions=self.json(iri, p, "extensions", default=dict),
        )
        if (r := self.child(iri, p, "reasoning")) is not None:
            rp = self.node(r, "LMReasoningConfig")
            self.check_slots(r, rp, CLASS_SLOTS["LMReasoningConfig"])
            c.reasoning = m.LMReasoningConfig(
                effort=self.string(r, rp, "effort"), max_tokens=self.integer(r, rp, "max_tokens"), summary=self.string(r, rp, "summary")
            )
        if (t := self.child(iri, p, "tool_choice")) is not None:
            tp = self.node(t, "LMToolChoice")
            self.check_slots(t, tp, CLASS_SLOTS["LMToolChoice"])
            mode = self.string(t, tp, "mode", required=True)
            if mode not in _TOOL_CHOICE_MODES:
                raise self.error(t, v.slot_iri("mode"), f"expected one of {', '.join(_TOOL_CHOICE_MODES)}, found {mode!r}")
            c.tool_choice = m.LMToolChoice(mode=mode, allowed=self.json(t, tp, "allowed"), parallel=self.boolean(t, tp, "parallel"))
        if (k := self.child(iri, p, "cache")) is not None:
            kp = self.node(k, "LMCacheConfig")
            self.check_slots(k, kp, CLASS_SLOTS["LMCacheConfig"])
            c.cache = m.LMCacheConfig(enabled=self.boolean(k, kp, "enabled"), rollout_id=self.json(k, kp, "rollout_id"))
        if (k := self.child(iri, p, "prompt_cache")) is not None:
            kp = self.node(k, "LMPromptCacheConfig")
            self.check_slots(k, kp, CLASS_SLOTS["LMPromptCacheConfig"])
            c.prompt_cache = m.LMPromptCacheConfig(enabled=self.boolean(k, kp, "enabled"), key=self.string(k, kp, "key"))
        return c

    def response(self, iri: str) -> m.LMResponse:
        p = self.node(iri, "LMResponse")
        self.check_slots(iri, p, _RESPONSE_SLOTS)
        outputs = []
        for child in self.children(iri, p, "outputs"):
            op = self.node(child, "LMOutput")
            self.check_slots(child, op, _OUTPUT_SLOTS)
            outputs.append(
                m.LMOutput(
                    parts=[self.part(c) for c in self.children(child, op, "parts")],
                    finish_reason=self.string(child, op, "finish_reason"),
                    truncated=self.boolean(child, op, "truncated", default=False),
                    logprobs=self.json(child, op, "logprobs"),
                    provider_data=self.json(child, op, "provider_data", default=dict),
                    metadata=self.json(child, op, "metadata", default=dict),
                )
            )
        if not outputs:
            raise self.error(iri, v.slot_iri("outputs"), "a response needs at least one output")
        u = self.child(iri, p, "usage")
        usage = None if u is None else self.usage(u)
        return m.LMResponse(
            outputs=outputs,
            model=self.string(iri, p, "model"),
            usage=usage,
            cost=self.decimal(iri, p, "cost"),
            cache_hit=self.boolean(iri, p, "cache_hit", default=False),
            response_id=self.string(iri, p, "response_id"),
            provider_data=self.json(iri, p, "provider_data", default=dict),
            metadata=self.json(iri, p, "metadata", default=dict),
        )

    def usage(self, iri: str) -> m.LMUsage:
        p = self.node(iri, "LMUsage")
        self.check_slots(iri, p, _USAGE_SLOTS)
        return m.LMUsage(
            **{name: self.integer(iri, p, name) for name in m.USAGE_TOKEN_FIELDS},
            details=self.json(iri, p, "details", default=dict),
            metadata=self.json(iri, p, "metadata"),
            extra_fields=self.json(iri, p, "extra_fields", default=dict),
        )

    def tool_call_part(self, iri: str) -> m.LMToolCallPart:
        part = self.part(iri)
        if not isinstance(part, m.LMToolCallPart):
            raise self.error(iri, _TYPE, f"expected a dspy:LMToolCallPart, found {self.types.get(iri)}")
        return part

    def part(self, iri: str) -> m.LMPart:
        cls = _PART_BY_CLASS.get(self.types.get(iri, ""))
        if cls is None:
            raise self.error(iri, _TYPE, f"expected a subclass of dspy:LMPart, found {self.types.get(iri) or 'no rdf:type'}")
        p = self.nodes.get(iri, {})
        kind = cls.part_type
        self.check_slots(iri, p, _PART_SLOTS[kind])
        part_type = self.string(iri, p, "part_type", required=True)
        if part_type != kind:
            raise self.error(iri, v.slot_iri("part_type"), f"a {cls.__name__} has part_type {kind!r}, found {part_type!r}")
        metadata = self.json(iri, p, "metadata", default=dict)
        # The tag is compared on cls itself, not on the copy in kind, so that mypy narrows cls to the classes it names.
        if cls.part_type == "text" or cls.part_type == "refusal":
            return cls(text=self.string(iri, p, "text", required=True), metadata=metadata)
        if cls.part_type == "tool_call":
            return cls(
                name=self.string(iri, p, "name", required=True),
                call_id=self.string(iri, p, "call_id"),
                args=self.json(iri, p, "args", default=dict),
                provider_data=self.json(iri, p, "provider_data", default=dict),
                metadata=metadata,
            )
        if cls.part_type == "tool_result":
            return cls(
                call_id=self.string(iri, p, "call_id"),
                name=self.string(iri, p, "name"),
                content=[self.part(c) for c in self.children(iri, p, "content")],
                is_error=self.boolean(iri, p, "is_error", default=False),
                provider_data=self.json(iri, p, "provider_data", default=dict),
                metadata=metadata,
            )
        if cls.part_type == "thinking":
            return cls(
                text=self.string(iri, p, "text", required=True), redacted=self.boolean(iri, p, "redacted", default=False), metadata=metadata
            )
        if cls.part_type == "citation":
            return cls(
                text=self.string(iri, p, "text"),
                title=self.string(iri, p, "title"),
                url=self.string(iri, p, "url"),
                metadata=metadata,
            )
        fields: dict[str, Any] = {
            "media_type": self.string(iri, p, "media_type", required=True),
            "data": self.string(iri, p, "data"),
            "url": self.string(iri, p, "url"),
            "file_id": self.string(iri, p, "file_id"),
            "path": self.string(iri, p, "path"),
        }
        if kind == "image":
            fields["detail"] = self.string(iri, p, "detail")
        elif kind == "binary":
            fields["filename"] = self.string(iri, p, "filename")
        elif kind == "document":
            fields.update(
                source=self.json(iri, p, "source"),
                citations=self.json(iri, p, "citations", default=dict),
                title=self.string(iri, p, "title"),
                context=self.string(iri, p, "context"),
            )
        return cls(metadata=metadata, **fields)


# A node may carry every slot its class has in the schema (generated: canonical/schema_tables.py); derived facts
# (the schema's subset ``derived``: totals, a ToolExecution's tool_name, a call's duration) are allowed and ignored,
# as the writer recomputes them from the trace.
_TRACE_SLOTS = CLASS_SLOTS["Trace"]
_CALL_SLOTS = {name: CLASS_SLOTS[name] for name in ("ModuleCall", "LMCall", "ToolExecution", "EvaluateCall", "CompileCall")}
# The schema's PairingMethod and ToolChoiceMode enums, typed as the model's fields are.
_PAIRINGS: tuple[Literal["call_id", "name_and_args", "preceding_lm_call"], ...] = ("call_id", "name_and_args", "preceding_lm_call")
_TOOL_CHOICE_MODES: tuple[Literal["auto", "required", "none"], ...] = ("auto", "required", "none")
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_PART_REF = re.compile(r"/call/(?P<call>\d+)(?:/entry/response/output/(?P<output>\d+)/part|/tool_call)/(?P<part>\d+)")
_ENTRY_SLOTS = CLASS_SLOTS["LMHistoryEntry"]
_TOOL_SLOTS = CLASS_SLOTS["LMToolSpec"]
_CONFIG_SLOTS = CLASS_SLOTS["LMConfig"]
_RESPONSE_SLOTS = CLASS_SLOTS["LMResponse"]
_OUTPUT_SLOTS = CLASS_SLOTS["LMOutput"]
_USAGE_SLOTS = CLASS_SLOTS["LMUsage"]
_PART_SLOTS = {kind: CLASS_SLOTS[cls.__name__] for kind, cls in m.PART_CLASSES.items()}


def is_ledger_graph(graph: ox.NamedNode | ox.BlankNode | ox.DefaultGraph) -> bool:
    """Whether a graph is one of a store's ledger (:data:`~dspy_rdf.rdf.vocab.LEDGER`), not a trace."""
    return isinstance(graph, ox.NamedNode) and graph.value.startswith(v.LEDGER)


def traces_from_quads(quads: Iterable[ox.Quad | ox.Triple], *, source: str = "<input>") -> list[tuple[str, m.Trace]]:
    """Rebuild every trace found in ``quads``; return ``(trace IRI, trace)`` pairs ordered by source index, then IRI.

    Graph names are ignored, so triples (Turtle, N-Triples) and quads (TriG, N-Quads) read alike.
    """
    graph = _Graph(source)
    for q in quads:
        if isinstance(q, ox.Quad) and is_ledger_graph(q.graph_name):
            continue  # a store's ledger, which a dump may carry: the reading store counts the traces into its own
        s = q.subject
        if not isinstance(s, ox.NamedNode):
            raise RdfInputError(f"blank node subject {s} is not part of a dspy-rdf trace", source=source)
        graph.add(s.value, q.predicate.value, q.object)
    roots = [iri for iri, cls in graph.types.items() if cls == v.class_iri("Trace")]
    traces = [(iri, graph.trace(iri)) for iri in roots]
    traces.sort(key=lambda pair: (pair[1].source_index if pair[1].source_index is not None else math.inf, pair[0]))
    return traces

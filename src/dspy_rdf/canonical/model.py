"""The canonical in-memory model of a DSPy trace.

One dataclass per class of ``schema/dspy.yaml``, one field per slot, with the schema's names (``call_id``
where DSPy says ``id``, ``part_type`` where DSPy says ``type``). The classes hold pure values: node
identity (IRIs, graph names) is minted by :mod:`dspy_rdf.rdf.writer`, and ``position`` is the index of an item
in its list, so neither appears here. ``tests/test_schema.py`` proves that these classes and the
schema agree slot by slot.

JSON-valued slots (range ``Any`` in the schema) hold plain JSON values; an empty dict is the same as
absent, as in DSPy, where those fields default to ``{}``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, Literal, Union, get_args

JSONValue = Any
JSONObject = dict[str, Any]

DECIMAL_PLACES = 15
"""Decimal numbers of a trace (costs, ``temperature``, ``top_p``, scores) are kept to this many places after the
point: what every store keeps exactly (Virtuoso keeps 15 places, pyoxigraph computes with 18), so that a trace reads
back from any store as it was written. Binary noise of a float beyond that (``0.00030750000000000005`` from
``0.0003 + 0.0000075``) is dropped when the trace is built; integers, booleans and numbers that need no more places
are kept as they are."""


def decimal_number(value: float | int | bool | None) -> float | int | bool | None:
    """A decimal number as a trace keeps it: a float rounded to :data:`DECIMAL_PLACES` places after the point (a
    float that is not finite is kept: the writer refuses it); anything else as it is."""
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    rounded = round(value, DECIMAL_PLACES)
    return rounded if rounded != 0 else 0.0  # never -0.0


_DATETIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?")
_CANONICAL_DATETIME = re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):\d\d:\d\d(?:\.\d{0,5}[1-9])?Z?")


def canonical_datetime(text: str) -> str:
    """An ``xsd:dateTime`` as a trace keeps it, in the one form every store and serializer this project writes to
    gives back: a time with an offset in UTC, written with ``Z``; the fraction of a second kept to the microsecond
    (Virtuoso keeps no more), without trailing zeros (pyoxigraph writes none); ``24:00:00`` as the next day's
    ``00:00:00``. A time without an offset (DSPy's history entries: local time) keeps none. ``2025-01-31T12:00:00.020760+01:00``
    becomes ``2025-01-31T11:00:00.02076Z``. Text that is not a date-time of years 1 to 9999 is returned as it is (the
    readers refuse it, naming the field, before it reaches a trace)."""
    if _CANONICAL_DATETIME.fullmatch(text) is not None:
        return text
    match = _DATETIME.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return text
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    next_day = hour == "24" and minute == "00" and second == "00" and not (fraction or "").strip("0")
    try:
        moment = datetime(int(year), int(month), int(day), 0 if next_day else int(hour), int(minute), int(second),
                          int(((fraction or "") + "000000")[:6]))
        if next_day:
            moment += timedelta(days=1)
        if offset is not None and offset != "Z":
            delta = timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))
            moment = moment - delta if offset[0] == "+" else moment + delta
    except (ValueError, OverflowError):
        return text
    return format_datetime(moment, utc=offset is not None)


def format_datetime(moment: datetime, *, utc: bool | None = None) -> str:
    """A :class:`~datetime.datetime` in the canonical form of :func:`canonical_datetime`: an aware one in UTC (``Z``),
    a naive one as it is (``utc=True``: a naive one that already holds UTC)."""
    if moment.tzinfo is not None:
        moment, utc = moment.astimezone(timezone.utc), True
    out = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    if moment.microsecond:
        out += "." + f"{moment.microsecond:06d}".rstrip("0")
    return out + "Z" if utc else out


def utc_datetime(seconds: float) -> str:
    """Seconds since the epoch (``time.time()``) as a canonical UTC date-time (:func:`canonical_datetime`)."""
    return format_datetime(datetime.fromtimestamp(seconds, timezone.utc))

PART_TYPES = (
    "text",
    "image",
    "audio",
    "video",
    "document",
    "binary",
    "tool_call",
    "tool_result",
    "thinking",
    "citation",
    "refusal",
)
"""Every part kind, in the order of the schema's ``LMPartType`` enum."""


@dataclass(slots=True, kw_only=True)
class LMTextPart:
    """Text content."""

    part_type: ClassVar[Literal["text"]] = "text"
    text: str
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMImagePart:
    """Image content from exactly one of data, url, file_id or path."""

    part_type: ClassVar[Literal["image"]] = "image"
    media_type: str = "image/png"
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    path: str | None = None
    detail: Literal["low", "high", "auto"] | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMAudioPart:
    """Audio content from exactly one of data, url, file_id or path."""

    part_type: ClassVar[Literal["audio"]] = "audio"
    media_type: str = "audio/wav"
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    path: str | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMVideoPart:
    """Video content from exactly one of data, url, file_id or path."""

    part_type: ClassVar[Literal["video"]] = "video"
    media_type: str = "video/mp4"
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    path: str | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMDocumentPart:
    """Document content: one media source, or a provider-shaped ``source`` object."""

    part_type: ClassVar[Literal["document"]] = "document"
    media_type: str = "application/pdf"
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    path: str | None = None
    source: JSONObject | None = None
    citations: JSONObject = field(default_factory=dict)
    title: str | None = None
    context: str | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMBinaryPart:
    """Opaque binary content from exactly one of data, url, file_id or path."""

    part_type: ClassVar[Literal["binary"]] = "binary"
    media_type: str = "application/octet-stream"
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    path: str | None = None
    filename: str | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMToolCallPart:
    """A model request to call a tool; ``call_id`` is DSPy's ``id``."""

    part_type: ClassVar[Literal["tool_call"]] = "tool_call"
    name: str
    call_id: str | None = None
    args: JSONObject = field(default_factory=dict)
    provider_data: JSONObject = field(default_factory=dict)
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMToolResultPart:
    """A tool execution result sent back to a model."""

    part_type: ClassVar[Literal["tool_result"]] = "tool_result"
    call_id: str | None = None
    name: str | None = None
    content: list[LMPart] = field(default_factory=list)
    is_error: bool = False
    provider_data: JSONObject = field(default_factory=dict)
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMThinkingPart:
    """Reasoning or thinking content returned by a model."""

    part_type: ClassVar[Literal["thinking"]] = "thinking"
    text: str
    redacted: bool = False
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMCitationPart:
    """A source citation returned by a model."""

    part_type: ClassVar[Literal["citation"]] = "citation"
    text: str | None = None
    title: str | None = None
    url: str | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMRefusalPart:
    """A model refusal."""

    part_type: ClassVar[Literal["refusal"]] = "refusal"
    text: str
    metadata: JSONObject = field(default_factory=dict)


LMPart = Union[
    LMTextPart,
    LMImagePart,
    LMAudioPart,
    LMVideoPart,
    LMDocumentPart,
    LMBinaryPart,
    LMToolCallPart,
    LMToolResultPart,
    LMThinkingPart,
    LMCitationPart,
    LMRefusalPart,
]

PART_CLASSES: dict[str, type[LMPart]] = {
    cls.part_type: cls
    for cls in (
        LMTextPart,
        LMImagePart,
        LMAudioPart,
        LMVideoPart,
        LMDocumentPart,
        LMBinaryPart,
        LMToolCallPart,
        LMToolResultPart,
        LMThinkingPart,
        LMCitationPart,
        LMRefusalPart,
    )
}
"""Part class by its ``part_type`` tag."""


@dataclass(slots=True, kw_only=True)
class LMMessage:
    """A role-attributed sequence of parts."""

    role: str
    parts: list[LMPart] = field(default_factory=list)
    name: str | None = None
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMToolSpec:
    """A tool offered to the model; ``tool_type`` is DSPy's ``type``."""

    name: str
    tool_type: str = "function"
    description: str | None = None
    parameters: JSONObject = field(default_factory=dict)
    strict: bool | None = None
    metadata: JSONObject = field(default_factory=dict)
    provider_data: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMReasoningConfig:
    """Reasoning controls."""

    effort: str | None = None
    max_tokens: int | None = None
    summary: str | None = None


@dataclass(slots=True, kw_only=True)
class LMToolChoice:
    """Tool-choice controls."""

    mode: Literal["auto", "required", "none"] = "auto"
    allowed: list[str] | None = None
    parallel: bool | None = None


@dataclass(slots=True, kw_only=True)
class LMCacheConfig:
    """DSPy memoization cache controls."""

    enabled: bool | None = None
    rollout_id: int | str | None = None


@dataclass(slots=True, kw_only=True)
class LMPromptCacheConfig:
    """Provider-side prompt cache controls."""

    enabled: bool | None = None
    key: str | None = None


@dataclass(slots=True, kw_only=True)
class LMConfig:
    """Generation controls of a request."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    n: int | None = None
    logprobs: bool | int | None = None
    response_format: JSONValue | None = None
    reasoning: LMReasoningConfig | None = None
    tool_choice: LMToolChoice | None = None
    cache: LMCacheConfig | None = None
    prompt_cache: LMPromptCacheConfig | None = None
    extensions: JSONObject = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.temperature = decimal_number(self.temperature)
        self.top_p = decimal_number(self.top_p)


@dataclass(slots=True, kw_only=True)
class LMRequest:
    """A normalized LM request."""

    model: str
    messages: list[LMMessage] = field(default_factory=list)
    tools: list[LMToolSpec] = field(default_factory=list)
    config: LMConfig = field(default_factory=LMConfig)
    metadata: JSONObject = field(default_factory=dict)


USAGE_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "input_audio_tokens",
    "output_audio_tokens",
)
"""The integer token counts of ``LMUsage``, in DSPy's field order."""


@dataclass(slots=True, kw_only=True)
class LMUsage:
    """Token usage; ``extra_fields`` keeps fields DSPy's ``LMUsage`` accepted as extras."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    input_audio_tokens: int | None = None
    output_audio_tokens: int | None = None
    details: JSONObject = field(default_factory=dict)
    metadata: JSONValue | None = None
    extra_fields: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMOutput:
    """One generated candidate."""

    parts: list[LMPart] = field(default_factory=list)
    finish_reason: str | None = None
    truncated: bool = False
    logprobs: JSONValue | None = None
    provider_data: JSONObject = field(default_factory=dict)
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class LMResponse:
    """The normalized result of one LM request."""

    outputs: list[LMOutput]
    model: str | None = None
    usage: LMUsage | None = None
    cost: float | None = None
    cache_hit: bool = False
    response_id: str | None = None
    provider_data: JSONObject = field(default_factory=dict)
    metadata: JSONObject = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cost = decimal_number(self.cost)


@dataclass(slots=True, kw_only=True)
class LMHistoryEntry:
    """One LM call as recorded in ``lm.history``."""

    request: LMRequest
    response: LMResponse
    timestamp: str
    uuid: str
    model_type: str | None = None
    extra_fields: JSONObject = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timestamp = canonical_datetime(self.timestamp)


SourceKind = Literal[
    "lm_history_entry",
    "lm_history",
    "lm_request",
    "lm_response",
    "lm_message",
    "lm_part",
    "request_response",
    "trajectory",
    "program_run",
]
SOURCE_KINDS: tuple[SourceKind, ...] = get_args(SourceKind)
"""Every trace source kind, in the order of the schema's ``TraceSourceKind`` enum."""

SourceFormat = Literal[
    "dspy33", "lm15", "history_dict", "openai_chat", "react_trajectory", "dspy_history", "dspy_callback", "mlflow", "otlp"
]
SOURCE_FORMATS: tuple[SourceFormat, ...] = get_args(SourceFormat)
"""Every trace source format, in the order of the schema's ``TraceSourceFormat`` enum."""

CONTENT_SLOT: dict[str, str] = {
    "lm_history_entry": "entries",
    "lm_history": "entries",
    "lm_request": "request",
    "lm_response": "response",
    "lm_message": "messages",
    "lm_part": "parts",
    "request_response": "request",
    "trajectory": "messages",
    "program_run": "calls",
}
"""The slot of :class:`Trace` that carries the content of each source kind."""


@dataclass(slots=True, kw_only=True)
class Trace:
    """The unit of export and storage: what one DSPy object (or one history list, or one program run) holds.

    ``source_kind`` says which slot carries the content (:data:`CONTENT_SLOT`; a ``request_response`` trace
    has both ``request`` and ``response``), ``source_format`` which family of DSPy shapes it was read from.
    """

    source_kind: SourceKind
    source_format: SourceFormat = "dspy33"
    entries: list[LMHistoryEntry] = field(default_factory=list)
    request: LMRequest | None = None
    response: LMResponse | None = None
    messages: list[LMMessage] = field(default_factory=list)
    parts: list[LMPart] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    started_at: str | None = None
    ended_at: str | None = None
    dspy_version: str | None = None
    source_index: int | None = None
    source_trace_id: str | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    losses: JSONValue = field(default_factory=list)  # a JSON list of {"field": ..., "reason": ...}
    session_id: str | None = None
    """The session (conversation, thread) the run belongs to, as the recorder named it; None when none was recorded."""
    user_id: str | None = None
    """The user on whose behalf the run was made, as the recorder named them; None when none was recorded."""
    content_digest: str | None = field(default=None, compare=False)
    """The digest a trace read back from RDF was stored with (``dspy:content_digest``), which tells whether the quads
    read hold all of it; not part of its content (:mod:`dspy_rdf.canonical.identity`). The writer writes the digest of what it
    writes."""

    def __post_init__(self) -> None:
        if self.started_at is not None:
            self.started_at = canonical_datetime(self.started_at)
        if self.ended_at is not None:
            self.ended_at = canonical_datetime(self.ended_at)


# --- Program runs recorded by the capture callback ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartRef:
    """Where a tool-call part sits in a program run: ``calls[call]``'s response ``outputs[output].parts[part]``,
    or, when ``output`` is None, ``calls[call].tool_calls[part]`` of a module call."""

    call: int
    output: int | None
    part: int

    def order(self) -> tuple[int, int, int]:
        """The canonical order of references (by call, output, part; a module's own tool calls first)."""
        return (self.call, -1 if self.output is None else self.output, self.part)


@dataclass(slots=True, kw_only=True)
class ModuleCall:
    """A call of a ``dspy.Module``; ``parent_call`` is the index of the enclosing module call in ``Trace.calls``;
    ``module_class`` is the class's name (``Predict``), ``module_class_path`` its qualified name where the recorder saw
    the class (``dspy.predict.predict.Predict``); ``usage`` is what a recorder reported for the LM calls within it as a
    whole."""

    module_class: str
    started_at: str
    ended_at: str | None = None
    dspy_call_id: str | None = None
    parent_call: int | None = None
    error: str | None = None
    input_summary: JSONValue | None = None
    output_summary: JSONValue | None = None
    tool_calls: list[LMToolCallPart] = field(default_factory=list)
    returned_tool_calls: list[PartRef] = field(default_factory=list)
    module_class_path: str | None = None
    usage: LMUsage | None = None

    def __post_init__(self) -> None:
        if self.module_class_path is None and "." in self.module_class:  # dspy-rdf 0.1.0 named a class by its path
            self.module_class_path, self.module_class = self.module_class, self.module_class.rpartition(".")[2]
        self.started_at = canonical_datetime(self.started_at)
        if self.ended_at is not None:
            self.ended_at = canonical_datetime(self.ended_at)


@dataclass(slots=True, kw_only=True)
class LMCall:
    """A call of a DSPy LM and the history entry it recorded."""

    started_at: str
    ended_at: str | None = None
    dspy_call_id: str | None = None
    parent_call: int | None = None
    error: str | None = None
    model: str | None = None
    entry: LMHistoryEntry | None = None

    def __post_init__(self) -> None:
        self.started_at = canonical_datetime(self.started_at)
        if self.ended_at is not None:
            self.ended_at = canonical_datetime(self.ended_at)


@dataclass(slots=True, kw_only=True)
class ToolExecution:
    """One execution of a ``dspy.Tool``; ``answers``/``decided_by`` say what asked for it, ``pairing`` how we know."""

    tool_call: ToolCall
    started_at: str
    ended_at: str | None = None
    dspy_call_id: str | None = None
    parent_call: int | None = None
    error: str | None = None
    tool_result: ToolResult | None = None
    answers: PartRef | None = None
    decided_by: int | None = None
    pairing: Literal["call_id", "name_and_args", "preceding_lm_call"] | None = None

    def __post_init__(self) -> None:
        self.started_at = canonical_datetime(self.started_at)
        if self.ended_at is not None:
            self.ended_at = canonical_datetime(self.ended_at)


@dataclass(slots=True, kw_only=True)
class ExampleResult:
    """One example of an evaluation; ``program_call`` is the index (in ``Trace.calls``) of the program's module call."""

    example: JSONValue | None = None
    prediction: JSONValue | None = None
    score: float | None = None
    program_call: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        self.score = decimal_number(self.score)


@dataclass(slots=True, kw_only=True)
class EvaluateCall:
    """A call of ``dspy.Evaluate``; the program calls it made are its descendants in ``Trace.calls``."""

    started_at: str
    ended_at: str | None = None
    dspy_call_id: str | None = None
    parent_call: int | None = None
    error: str | None = None
    metric: str | None = None
    program_class: str | None = None
    program_fingerprint: str | None = None
    devset_size: int | None = None
    score: float | None = None
    example_results: list[ExampleResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.score = decimal_number(self.score)
        self.started_at = canonical_datetime(self.started_at)
        if self.ended_at is not None:
            self.ended_at = canonical_datetime(self.ended_at)


@dataclass(slots=True, kw_only=True)
class TrainingExample:
    """One example of the training set a compile was given, summarized as JSON."""

    example: JSONValue | None = None


@dataclass(slots=True, kw_only=True)
class ProgramCandidate:
    """A program a compile started from, evaluated or returned; ``parent_candidates`` are indices into the same
    ``CompileCall.candidates`` (earlier ones), ``state_changes`` what differs from the first parent, per predictor."""

    program_fingerprint: str
    parent_candidates: list[int] = field(default_factory=list)
    state_changes: JSONValue | None = None
    score: float | None = None

    def __post_init__(self) -> None:
        self.score = decimal_number(self.score)


@dataclass(slots=True, kw_only=True)
class CompileCall:
    """A call of an optimizer's ``compile``; the runs and evaluations it made are its descendants."""

    optimizer_class: str
    started_at: str
    ended_at: str | None = None
    dspy_call_id: str | None = None
    parent_call: int | None = None
    error: str | None = None
    input_summary: JSONValue | None = None
    program_class: str | None = None
    student_fingerprint: str | None = None
    program_fingerprint: str | None = None
    candidates: list[ProgramCandidate] = field(default_factory=list)
    training_examples: list[TrainingExample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.started_at = canonical_datetime(self.started_at)
        if self.ended_at is not None:
            self.ended_at = canonical_datetime(self.ended_at)


Call = Union[ModuleCall, LMCall, ToolExecution, EvaluateCall, CompileCall]


# --- Tool execution (dspy.Tool, dspy.ToolCalls, dspy.Citations) -----------------------------------


@dataclass(slots=True, kw_only=True)
class Tool:
    """A Python function exposed as a tool (``dspy.Tool``)."""

    name: str
    description: str | None = None
    args: JSONObject = field(default_factory=dict)
    arg_types: JSONObject = field(default_factory=dict)
    arg_desc: JSONObject = field(default_factory=dict)
    has_kwargs: bool | None = None


@dataclass(slots=True, kw_only=True)
class ToolCall:
    """One tool execution as requested."""

    name: str
    call_id: str | None = None
    args: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ToolResult:
    """The outcome of one tool execution."""

    name: str | None = None
    call_id: str | None = None
    result: JSONValue | None = None
    is_error: bool | None = None
    error: str | None = None
    provider_data: JSONObject = field(default_factory=dict)
    metadata: JSONObject = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ToolCalls:
    """The value of a ``dspy.ToolCalls`` output."""

    tool_calls: list[LMToolCallPart] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class Citation:
    """One citation of ``dspy.Citations``."""

    cited_text: str
    document_index: int
    start_char_index: int
    end_char_index: int
    citation_type: str | None = None
    document_title: str | None = None
    supported_text: str | None = None
    metadata: JSONObject = field(default_factory=dict)


# --- pickling --------------------------------------------------------------------------------------------------------
# Live capture hands every finished run to its writer process as a pickle. A slots dataclass pickles by default as a
# state dict per object; as (class, field values) it pickles in about half the time, which the program pays per run.


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def from_field_values(cls: type, values: tuple[Any, ...]) -> Any:
    """A model object of ``cls`` with ``values`` for its fields, in their order (how model objects unpickle)."""
    obj: object = object.__new__(cls)
    for name, value in zip(_FIELD_NAMES[cls], values):
        object.__setattr__(obj, name, value)
    return obj


def _register_pickling() -> None:
    import copyreg
    import operator
    from dataclasses import fields, is_dataclass

    for cls in list(globals().values()):
        if not (isinstance(cls, type) and is_dataclass(cls) and cls.__module__ == __name__):
            continue
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
        if len(names) == 1:
            getter = (lambda name: lambda obj: (getattr(obj, name),))(names[0])
        else:
            getter = operator.attrgetter(*names)
        copyreg.pickle(cls, (lambda cls, getter: lambda obj: (from_field_values, (cls, getter(obj))))(cls, getter))


_register_pickling()

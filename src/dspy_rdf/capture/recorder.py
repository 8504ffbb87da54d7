"""Live capture: a DSPy callback that records each whole program run as one trace.

    recorder = TraceRecorder(FileSink("runs.nq"))
    dspy.configure(callbacks=[recorder])
    program(question="...")          # the run is written when its top-level call returns

A *run* is the tree of calls under one top-level call (a module, or an LM called directly). Each call is
recorded with its start and end time (UTC), its parent module call (from DSPy's ``ACTIVE_CALL_ID``, which is
the parent's call id inside a start handler) and its error, if it raised:

- module calls: the module's class and summaries of its inputs and outputs (long strings cut, objects as
  ``repr``; see :func:`summarize`), and the tool calls it returned as ``dspy.ToolCalls``: a call one of its LM
  responses holds as a tool-call part (native function calling) points at that part (``returned_tool_calls``: one
  call is one part), a call an adapter parsed from text is a tool-call part of the module call;
- LM calls: the history entry the call appended to ``lm.history`` (typed ``LMHistoryEntry`` or legacy dict,
  any DSPy version), found by identity among the entries appended since the call started, and converted to JSON
  data the way its libraries write it (:mod:`dspy_rdf.sources.live`: LiteLLM's and lm15's objects included) when the call
  ends, so that a program changing the live objects later (appending to the message list it sent) does not change
  what the call was sent;
- evaluations (``dspy.Evaluate``): the program (its class and :func:`program_fingerprint`), the metric, the
  devset size, the score, and each example's result linked to the program call that produced it; the program
  calls run in Evaluate's worker threads belong to the evaluation;
- compilations (an optimizer's ``compile``): the optimizer, the student's and the compiled program's
  fingerprints; what it ran is below it;
- tool executions (``dspy.Tool``): the tool name and arguments, the result or the exception text
  (``is_error``), and what asked for the execution. DSPy's tool callbacks do not receive the provider's
  tool-call id, so an execution is paired with the latest unanswered tool-call part of the same name and
  arguments among the calls of its own module call (``pairing`` ``name_and_args``); when there is none (e.g.
  ``dspy.ReAct``, which asks for tools in text fields) it is linked to the last LM call of that module call
  that ended before it started (``preceding_lm_call``). Both are marked as inferred in the graph.

Handlers are thread-safe (one lock; a top-level call started in another thread, as a top-level ``dspy.Parallel``
makes, is a run of its own, but the calls a module makes in other threads, and the evaluated program's, belong to its
run). Each call converts the live values it keeps to JSON data when it starts or ends, and the rest happens once, after
the run ends (:mod:`dspy_rdf.capture.runs`: reading the history entries, pairing, times), so a call adds little to the
program's own work (``bench/bench_capture.py`` measures it). Every sink is handed the run as recorded: a
``MemorySink`` builds the trace when its ``traces`` are read, a ``FileSink`` or ``StoreSink`` in its writer process,
which also writes it (read them after :meth:`TraceRecorder.flush`); an ``on_run`` callback gets the trace built in the
program before the program's call returns.
The recorder starts no thread in the program. A callback must never break the program, and DSPy swallows callback
exceptions: a run is never lost. A value without a JSON form, or whose text cannot be read, is kept as its text (or
its type's name); text that no trace can hold (a lone UTF-16 surrogate) gets U+FFFD in its place; a setting an LM
entry's reader refuses (a NaN temperature) is left out of that entry alone; each is listed, with its place, in the
trace's ``losses``. A run the sink cannot write stays in :attr:`TraceRecorder.unwritten`; both are reported in
:attr:`TraceRecorder.errors`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.identity import canonical_json, short_hash
from dspy_rdf.capture.runs import RecordedRun, ReturnedCall, build_trace, loss_note
from dspy_rdf.capture.sinks import FileSink, MemorySink, Sink, StoreSink, as_sink
from dspy_rdf.sources.live import builtin_value, json_data, json_key, loss, text_of, unicode_text

try:
    import dspy
    from dspy.utils.callback import BaseCallback
except ImportError as exc:  # pragma: no cover - exercised only without dspy
    raise ImportError("live capture needs DSPy: pip install 'dspy-rdf[dspy]'") from exc

try:  # DSPy >= 3.0 keeps the active call id in callback_context
    from dspy.utils.callback_context import ACTIVE_CALL_ID
except ImportError:  # pragma: no cover - older DSPy
    from dspy.utils.callback import ACTIVE_CALL_ID

__all__ = ["FileSink", "MemorySink", "Sink", "StoreSink", "TraceRecorder", "program_fingerprint", "summarize"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_CHARS = 2000
"""Strings longer than this are cut in input, output and result summaries."""
_MAX_ITEMS = 200
_MAX_DEPTH = 12


def summarize(value: Any, *, max_chars: int = DEFAULT_MAX_CHARS, losses: list[dict[str, str]] | None = None, path: str = "") -> Any:
    """A JSON summary of a live value: JSON scalars as they are, strings over ``max_chars`` cut and marked,
    containers recursively (at most 200 items, 12 levels), DSPy predictions and pydantic models as their
    fields, anything else as its ``repr``. It never raises: a value whose fields or text cannot be read, or text
    that no Unicode string can hold (a lone surrogate), is kept as far as it can be and the place (``path`` and
    below) is added to ``losses``."""
    return _summary(value, max_chars, [] if losses is None else losses, path, 0)


def _summary(value: Any, max_chars: int, losses: list[dict[str, str]], path: str, depth: int) -> Any:
    if value is None or isinstance(value, (bool, int)):
        return builtin_value(value)
    if isinstance(value, float):
        return builtin_value(value) if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        text = unicode_text(builtin_value(value), path, losses)
        if len(text) <= max_chars:
            return text
        return text[:max_chars] + f"… [{len(text) - max_chars} more characters]"
    if depth < _MAX_DEPTH:
        try:
            return _summary_of_container(value, max_chars, losses, path, depth)
        except Exception as exc:  # noqa: BLE001 - a live object's fields can raise anything; the run must be kept
            losses.append(loss(path, f"a {type(value).__qualname__} could not be summarized ({type(exc).__name__}); kept as its repr"))
    return _summary(text_of(value, path, losses, use_repr=True), max_chars, losses, path, depth)


def _summary_of_container(value: Any, max_chars: int, losses: list[dict[str, str]], path: str, depth: int) -> Any:
    """The summary of a dict, list, DSPy prediction or pydantic model; anything else is summarized as its repr."""
    # Short ASCII strings, integers, booleans and None are taken as they are without a call of their own (most of
    # what modules take and return); a leaf's path is made only for a loss.
    if isinstance(value, dict):
        out = {}
        for count, (k, v) in enumerate(value.items()):
            if count == _MAX_ITEMS:
                out["…"] = f"{len(value) - _MAX_ITEMS} more items"
                break
            key = k if type(k) is str and k.isascii() else json_key(k, path, losses)
            leaf = type(v)
            if (leaf is str and len(v) <= max_chars and v.isascii()) or v is None or leaf is int or leaf is bool:
                out[key] = v
            else:
                out[key] = _summary(v, max_chars, losses, f"{path}.{key}" if path else key, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        out_list = []
        for i, v in enumerate(value[:_MAX_ITEMS]):
            leaf = type(v)
            if (leaf is str and len(v) <= max_chars and v.isascii()) or v is None or leaf is int or leaf is bool:
                out_list.append(v)
            else:
                out_list.append(_summary(v, max_chars, losses, f"{path}[{i}]", depth + 1))
        if len(value) > _MAX_ITEMS:
            out_list.append(f"… {len(value) - _MAX_ITEMS} more items")
        return out_list
    if hasattr(value, "toDict") and callable(value.toDict):  # dspy.Prediction, dspy.Example
        return _summary(value.toDict(), max_chars, losses, path, depth + 1)
    if hasattr(value, "model_dump"):
        try:
            dumped = value.model_dump(mode="json")
        except (TypeError, ValueError):  # a model holding values pydantic cannot write as JSON
            dumped = text_of(value, path, losses, use_repr=True)
        return _summary(dumped, max_chars, losses, path, depth + 1)
    return _summary(text_of(value, path, losses, use_repr=True), max_chars, losses, path, _MAX_DEPTH)


def _identifier(value: Any, name: str) -> str | None:
    """A session or user id as given to the recorder: None, or text with a character other than white space."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string or None, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty or blank; give None for no {name.removesuffix('_id')}")
    return value


def _error_text(exception: BaseException | None, losses: list[dict[str, str]], path: str = "error") -> str | None:
    if exception is None:
        return None
    return f"{type(exception).__name__}: {text_of(exception, path, losses)}"


def _at(index: int, losses: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """Losses noted with paths inside one call, as paths inside its run."""
    return [loss(f"calls[{index}]" + (f".{item['field']}" if item["field"] != "(the value)" else ""), item["reason"]) for item in losses]


# --- the recorder ------------------------------------------------------------------------------------------


@dataclass
class _Run(RecordedRun):
    """A run being recorded: the plain record (see :class:`~dspy_rdf.capture.runs.RecordedRun`) and what only the program
    holds while the run goes on."""

    claimed: set[int] = field(default_factory=set)  # ids of the live lm.history entries taken by its LM calls
    outputs: dict[int, Any] = field(default_factory=dict)  # module call index -> its live outputs, while an evaluation may ask
    evaluations: dict[int, Any] = field(default_factory=dict)  # evaluate call index -> the live EvaluationResult
    learnable: dict[str, dict[str, Any]] = field(default_factory=dict)  # fingerprint -> instructions and demos per predictor
    open_calls: int = 0


@dataclass
class _Evaluation:
    """An evaluation in progress: its run and call, and the program it runs (possibly in other threads)."""

    run: _Run
    index: int
    program: Any


class TraceRecorder(BaseCallback):
    """A DSPy callback that records each program run as one ``program_run`` trace and hands it to each of ``sinks``
    (a :class:`MemorySink` when none is given): ``TraceRecorder(FileSink("runs.jsonl"), StoreSink())`` keeps an
    archive and a store of the same recording, which are one trace each run (the same IRI, see
    :mod:`dspy_rdf.canonical.identity`).

    ``max_chars`` bounds the strings kept in summaries. ``on_run`` (optional) is called with each finished trace
    after the sinks, e.g. to print its IRI (in the thread that ended the run; a ``FileSink`` or ``StoreSink`` writes
    it later: its runs and failures are all in after :meth:`flush`); the trace is then built in the program, which
    the sinks would otherwise do. :attr:`errors` lists, one line each, every run that was recorded with a
    loss (a value kept as text, see ``Trace.losses``) and every run a sink could not write; a run a sink could
    not write is kept in :attr:`unwritten`, so that nothing recorded is lost.

    ``session_id`` and ``user_id`` (optional) name the session (a conversation of several runs) and the user each run
    is made for; they go into each trace (``dspy:session_id``, ``dspy:user_id``). Both are attributes too: a run takes
    the values they have when its top-level call starts, so one recorder can follow several conversations::

        recorder.session_id, recorder.user_id = "conversation-42", "alice"
        program(question="...")

    An id is text with a character other than white space (an empty or blank one is a ``ValueError``, one that is not
    text a ``TypeError``), or None for none.
    """

    def __init__(
        self,
        *sinks: Sink,
        sink: Sink | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        on_run: Callable[[m.Trace], None] | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        super().__init__()
        self.session_id = session_id
        self.user_id = user_id
        if sink is not None:  # the keyword of releases that took one sink
            sinks = (sink, *sinks)
        self.sinks: tuple[Sink, ...] = tuple(as_sink(each) for each in sinks) if sinks else (MemorySink(),)
        self.max_chars = max_chars
        self.on_run = on_run
        self._errors: list[str] = []
        self.unwritten: list[m.Trace] = []
        self._lock = threading.Lock()
        noting = True
        for sink in self.sinks:
            sink.on_failure = (lambda sink: lambda run, reason: self._not_written(run, reason, sink))(sink)
            # Every sink that builds runs builds the same traces: one of them says what building noted.
            sink.on_losses = self._report if noting or not sink.builds_runs else _ignore
            noting = noting and not sink.builds_runs
        self._where: dict[str, tuple[_Run, int]] = {}  # DSPy call id -> (run, index in run.calls)
        self._lm_marks: dict[str, tuple[Any, Any]] = {}  # LM call id -> (LM instance, last history entry at start)
        self._evaluating: list[_Evaluation] = []

    @property
    def sink(self) -> Sink:
        """The first of :attr:`sinks`."""
        return self.sinks[0]

    @property
    def session_id(self) -> str | None:
        """The session of the runs that start from now on (None: none)."""
        return self._session_id

    @session_id.setter
    def session_id(self, value: str | None) -> None:
        self._session_id = _identifier(value, "session_id")

    @property
    def user_id(self) -> str | None:
        """The user of the runs that start from now on (None: none)."""
        return self._user_id

    @user_id.setter
    def user_id(self, value: str | None) -> None:
        self._user_id = _identifier(value, "user_id")

    # -- bookkeeping --

    def _start(self, call_id: str, call: dict[str, Any], instance: Any = None, losses: Sequence[dict[str, str]] = ()) -> None:
        """Register a call that started, given as its record (see :class:`~dspy_rdf.capture.runs.RecordedRun`; ``losses``: what
        its handler could not record, with paths inside the call)."""
        started = time.time()
        parent_id = ACTIVE_CALL_ID.get()
        with self._lock:
            parent = self._where.get(parent_id) if parent_id is not None else None
            if parent is None and self._evaluating and call["call"] == "module":
                # dspy.Evaluate runs the program in worker threads, which do not inherit DSPy's active call: a
                # top-level call of the evaluated program while it runs belongs to that evaluation
                for evaluation in reversed(self._evaluating):
                    if evaluation.program is instance:
                        parent = (evaluation.run, evaluation.index)
                        break
            if parent is None:
                run = _Run(session_id=self._session_id, user_id=self._user_id)
            else:
                run, call["parent_call"] = parent[0], parent[1]
            call["dspy_call_id"] = call_id
            run.calls.append(call)
            run.starts.append(started)
            run.ends.append(None)
            run.open_calls += 1
            self._where[call_id] = (run, len(run.calls) - 1)
            if losses:
                run.losses.extend(_at(len(run.calls) - 1, losses))

    def _end(self, call_id: str, exception: BaseException | None, update: Callable[[_Run, int, dict, list], None]) -> None:
        """Register a call that ended; ``update(run, index, call, losses)`` records what it returned."""
        ended = time.time()
        with self._lock:
            found = self._where.pop(call_id, None)
            if found is None:
                return  # started before this recorder was attached
            run, index = found
            call = run.calls[index]
            run.ends[index] = ended
            losses: list[dict[str, str]] = []
            call["error"] = _error_text(exception, losses)
            try:
                update(run, index, call, losses)
            except Exception as exc:  # noqa: BLE001 - a bug of ours or a live value: the call still ends, the run is kept
                losses.append(loss("", f"what the call returned could not be recorded ({type(exc).__name__}); left out"))
            if losses:
                run.losses.extend(_at(index, losses))
            run.open_calls -= 1
            finished = run.open_calls == 0
        if finished:
            self._finish(run)

    # -- DSPy handlers --

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        losses: list[dict[str, str]] = []
        summary = summarize(inputs, max_chars=self.max_chars, losses=losses, path="input_summary")
        record = {"call": "module", "module_class": type(instance).__name__, "module_class_path": _class_name(instance), "input_summary": summary}
        self._start(call_id, record, instance, losses)

    def on_module_end(self, call_id: str, outputs: Any | None, exception: BaseException | None = None) -> None:
        def update(run: _Run, index: int, call: dict[str, Any], losses: list[dict[str, str]]) -> None:
            if outputs is not None:
                call["output_summary"] = summarize(outputs, max_chars=self.max_chars, losses=losses, path="output_summary")
            returned = _returned_tool_calls(outputs, losses)
            if returned:
                run.returned[index] = returned
            if self._evaluating and outputs is not None:
                run.outputs[index] = outputs

        self._end(call_id, exception, update)

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        history = getattr(instance, "history", None)
        last = history[-1] if isinstance(history, list) and history else None
        with self._lock:
            self._lm_marks[call_id] = (instance, last)
        self._start(call_id, {"call": "lm", "model": getattr(instance, "model", None)})

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: BaseException | None = None) -> None:
        with self._lock:
            instance, last = self._lm_marks.pop(call_id, (None, None))
        # DSPy appends the history entry before on_lm_end runs, and the entry holds the very object the call returned
        # (a legacy entry's `outputs`, a typed entry's `response`): that identity finds it among the entries appended
        # since the call started, whatever other threads appended meanwhile. An LM that records differently falls back
        # to the first entry after the call's start that no other call of the run claimed.
        entry = None
        history = getattr(instance, "history", None)
        if exception is None and isinstance(history, list):
            fallback = None
            for candidate in reversed(history):
                if candidate is last:
                    break
                held = candidate.get("outputs") if isinstance(candidate, dict) else getattr(candidate, "response", None)
                if held is outputs and outputs is not None:
                    entry = candidate
                    break
                fallback = candidate
            if entry is None:
                entry = fallback
        # Converted now, outside the lock: the program may change the live objects once the call returned.
        entry_losses: list[dict[str, str]] = []
        data = None if entry is None else json_data(entry, path="entry", losses=entry_losses)

        def update(run: _Run, index: int, call: dict[str, Any], losses: list[dict[str, str]]) -> None:
            if entry is not None and id(entry) not in run.claimed:
                run.claimed.add(id(entry))
                run.entries[index] = data
                losses.extend(entry_losses)

        self._end(call_id, exception, update)

    def on_tool_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        losses: list[dict[str, str]] = []
        # Arguments are kept exactly (not summarized): they are what pairs an execution with its tool-call part.
        args = json_data(inputs.get("kwargs", inputs), path="tool_call.args", losses=losses)
        name = text_of(getattr(instance, "name", None) or type(instance).__name__, "tool_call.name", losses)
        call = {"call": "tool", "tool_call": {"name": name, "args": args if isinstance(args, dict) else {"args": args}}}
        self._start(call_id, call, instance, losses)

    def on_tool_end(self, call_id: str, outputs: Any | None, exception: BaseException | None = None) -> None:
        def update(run: _Run, index: int, call: dict[str, Any], losses: list[dict[str, str]]) -> None:
            call["tool_result"] = {
                "name": call["tool_call"]["name"],
                "result": None if exception is not None else summarize(outputs, max_chars=self.max_chars, losses=losses, path="tool_result.result"),
                "is_error": exception is not None,
                "error": call["error"],
            }

        self._end(call_id, exception, update)

    def on_evaluate_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        program = inputs.get("program")
        fingerprint, learnable = _program_state(program)
        losses: list[dict[str, str]] = []
        try:
            metric = inputs.get("metric") or getattr(instance, "metric", None)
            devset = inputs.get("devset") or getattr(instance, "devset", None)
            call = {
                "call": "evaluate",
                "metric": _qualified_name(metric),
                "program_class": None if program is None else _class_name(program),
                "program_fingerprint": fingerprint,
                "devset_size": len(devset) if devset is not None and hasattr(devset, "__len__") else None,
            }
        except Exception as exc:  # noqa: BLE001 - live objects can raise anything; the evaluation is still recorded
            call = {"call": "evaluate"}
            losses.append(loss("", f"the evaluation's program, metric or devset could not be read ({type(exc).__name__}); left out"))
        self._start(call_id, call, instance, losses)
        with self._lock:
            where = self._where.get(call_id)
            if where is not None and program is not None:
                self._evaluating.append(_Evaluation(run=where[0], index=where[1], program=program))
                _keep(where[0], fingerprint, learnable)

    def on_evaluate_end(self, call_id: str, outputs: Any | None, exception: BaseException | None = None) -> None:
        def update(run: _Run, index: int, call: dict[str, Any], losses: list[dict[str, str]]) -> None:
            self._evaluating = [e for e in self._evaluating if not (e.run is run and e.index == index)]
            if outputs is not None:
                run.evaluations[index] = outputs
                call["score"] = _number(getattr(outputs, "score", None))

        self._end(call_id, exception, update)

    def on_compile_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        student = inputs.get("student")
        fingerprint, learnable = _program_state(student)
        trainset = inputs.get("trainset")
        examples = list(trainset) if isinstance(trainset, (list, tuple)) else None
        # the training set is kept example by example (what the compiled program is made from), not in the summary
        summary = {k: v for k, v in inputs.items() if k not in ("student", "teacher") and not (k == "trainset" and examples is not None)}
        losses: list[dict[str, str]] = []
        call = {
            "call": "compile",
            "optimizer_class": _class_name(instance),
            "input_summary": summarize(summary, max_chars=self.max_chars, losses=losses, path="input_summary"),
            "program_class": None if student is None else _class_name(student),
            "student_fingerprint": fingerprint,
        }
        if examples is not None:
            call["training_examples"] = [
                {"example": summarize(example, max_chars=self.max_chars, losses=losses, path=f"training_examples[{i}].example")}
                for i, example in enumerate(examples)
            ]
        self._start(call_id, call, instance, losses)
        with self._lock:
            where = self._where.get(call_id)
            if where is not None:
                _keep(where[0], fingerprint, learnable)

    def on_compile_end(self, call_id: str, outputs: Any | None, exception: BaseException | None = None) -> None:
        def update(run: _Run, index: int, call: dict[str, Any], losses: list[dict[str, str]]) -> None:
            if outputs is not None:
                call["program_class"] = _class_name(outputs)
                call["program_fingerprint"] = _keep_learnable(run, outputs)
            call["candidates"] = _candidates(run, index, call, outputs, self.max_chars, losses)

        self._end(call_id, exception, update)

    # -- finishing a run --

    def _finish(self, run: _Run) -> None:
        # In the thread that ends the run, before the program's call returns (a thread of the recorder's own, woken
        # for each run, cost the program more CPU than the work it took over; docs/benchmarks.md). A sink that writes
        # in a process of its own is handed the run as recorded and builds the trace there; otherwise it is built here.
        for index, result in run.evaluations.items():
            run.calls[index]["example_results"] = _example_results(result, run, index, self.max_chars, run.losses)
        recorded = RecordedRun(
            calls=run.calls, starts=run.starts, ends=run.ends, entries=run.entries, returned=run.returned,
            losses=run.losses, dspy_version=getattr(dspy, "__version__", None), session_id=run.session_id, user_id=run.user_id,
        )  # fmt: skip
        built: m.Trace | None = None
        if self.on_run is not None or not all(sink.builds_runs for sink in self.sinks):
            built = self._built(recorded)
        for sink in self.sinks:
            # built in the program anyway (for on_run, or for a sink that does not build runs): handed over built
            item: RecordedRun | m.Trace = built if built is not None and (self.on_run is not None or not sink.builds_runs) else recorded
            try:
                sink.write(item)
            except Exception as exc:  # noqa: BLE001 - DSPy would swallow it silently; the run is kept instead
                self._not_written(item, f"{type(exc).__name__}: {exc}", sink)
        if self.on_run is not None and built is not None:  # built whenever there is an on_run
            self.on_run(built)

    def _not_written(self, item: RecordedRun | m.Trace, reason: str, sink: Sink) -> None:
        # A run built here already (by a sink of this process that then failed) was noted when it was built.
        trace = item if isinstance(item, m.Trace) else item.trace if item.trace is not None else self._built(item)
        with self._lock:
            self.unwritten.append(trace)
        where = f" to {sink!r}" if len(self.sinks) > 1 else ""
        self._report(f"a run of {len(trace.calls)} calls could not be written{where} ({reason}); it is kept in recorder.unwritten")

    def _built(self, recorded: RecordedRun) -> m.Trace:
        trace = build_trace(recorded)
        if (note := loss_note(trace)) is not None:
            self._report(note)
        return trace

    @property
    def errors(self) -> list[str]:
        """One line for each run recorded with a loss (a value kept as text, see ``Trace.losses``) and each run the
        sink could not write. A ``MemorySink``'s runs are built (and their losses found) when this is read; a writer
        process's reports are all in after :meth:`flush`."""
        for sink in self.sinks:
            if isinstance(sink, MemorySink):
                sink.flush()
        return self._errors

    @errors.setter
    def errors(self, errors: list[str]) -> None:
        self._errors = errors

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the sinks have written every finished run (those they could not write are in :attr:`unwritten`
        then, and what building them noted in :attr:`errors`); False on timeout (``timeout`` is for each sink).
        Needed only before reading a sink's file or store in the same program."""
        return all([sink.flush(timeout) for sink in self.sinks])

    def close(self) -> None:
        """Write what is pending and close the sinks (see :meth:`flush`; a ``MemorySink``'s runs are built, what
        building noted reported); runs that finish later are written as they end."""
        for sink in self.sinks:
            sink.close()

    def _report(self, message: str) -> None:
        message = f"dspy-rdf: {message}"
        self._errors.append(message)
        logger.warning(message)


def _ignore(note: str) -> None:
    """What a second sink that builds runs noted: the first one said it."""


def _class_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _qualified_name(fn: Any) -> str | None:
    if fn is None:
        return None
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"


def _number(value: Any) -> float | None:
    """A score as a finite float (a boolean as 1.0 or 0.0); anything else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def program_fingerprint(program: Any) -> str | None:
    """The identity of a program's learnable state (see the schema's ``program_fingerprint``), or None when it has
    no ``dump_state``. Only the hash is kept: the state may hold an LM's settings, credentials included."""
    return _program_state(program)[0]


def _program_state(program: Any) -> tuple[str | None, dict[str, Any] | None]:
    """From one ``dump_state()``: the program's fingerprint, and each predictor's instructions and demos (nothing else
    of the state is kept: it may hold an LM's settings, credentials included); (None, None) when it has no state."""
    dump = getattr(program, "dump_state", None)
    if not callable(dump):
        return None, None
    try:
        state = dump()
    except Exception:  # noqa: BLE001 - a program whose state cannot be dumped simply has no fingerprint
        return None, None
    fingerprint = short_hash(canonical_json({"class": _class_name(program), "state": json_data(state)}))
    try:
        if isinstance(state, dict) and "signature" in state and "demos" in state:  # a predictor alone (dspy.Predict)
            state = {"self": state}  # named as DSPy's named_predictors() names it
        learnable: dict[str, Any] = {}
        for name, predictor in state.items():
            if isinstance(predictor, dict):
                signature = predictor.get("signature")
                learnable[str(name)] = {
                    "instructions": signature.get("instructions") if isinstance(signature, dict) else None,
                    "demos": predictor.get("demos", []),
                }
    except Exception:  # noqa: BLE001 - a state of another shape: the program has a fingerprint, no recorded changes
        return fingerprint, None
    return fingerprint, learnable


def _keep(run: _Run, fingerprint: str | None, learnable: dict[str, Any] | None) -> None:
    """Keep a program's learnable state in the run, under its fingerprint."""
    if fingerprint is not None and learnable is not None:
        run.learnable.setdefault(fingerprint, learnable)


def _keep_learnable(run: _Run, program: Any) -> str | None:
    """The program's fingerprint, its learnable state kept in the run under it."""
    fingerprint, learnable = _program_state(program)
    _keep(run, fingerprint, learnable)
    return fingerprint


def _lineage(outputs: Any, run: _Run) -> tuple[list[str], dict[str, list[str]], dict[str, float]] | None:
    """The candidates an optimizer reports with their parents and scores (GEPA's ``detailed_results``, kept on the
    program it returns when ``track_stats`` is on), by fingerprint; None when it reports none."""
    details = getattr(outputs, "detailed_results", None)
    try:
        programs, parents, scores = details.candidates, details.parents, details.val_aggregate_scores  # type: ignore[union-attr]
        fingerprints = [_keep_learnable(run, program) for program in programs]
        if any(f is None for f in fingerprints) or len(parents) != len(fingerprints):
            return None
        order = [f for f in fingerprints if f is not None]
        made_from: dict[str, list[str]] = {}
        for fingerprint, indices in zip(order, parents):
            made_from.setdefault(fingerprint, [])
            for i in indices or []:
                if isinstance(i, int) and 0 <= i < len(order) and order[i] != fingerprint and order[i] not in made_from[fingerprint]:
                    made_from[fingerprint].append(order[i])
        scored = {f: number for f, score in zip(order, scores) if (number := _number(score)) is not None}
        return order, made_from, scored
    except Exception:  # noqa: BLE001 - another optimizer's result, or a GEPA whose result has another shape
        return None


def _state_changes(state: dict[str, Any] | None, parent: dict[str, Any] | None, max_chars: int, losses: list[dict[str, str]], path: str) -> Any:
    """Per predictor, the instructions and demos of ``state`` that differ from ``parent``'s."""
    if state is None or parent is None:
        return None
    changes: dict[str, Any] = {}
    for name, predictor in state.items():
        before = parent.get(name, {})
        changed = {key: value for key, value in predictor.items() if before.get(key) != value}
        if changed:
            changes[name] = summarize(changed, max_chars=max_chars, losses=losses, path=f"{path}.{name}")
    return changes


def _candidates(run: _Run, index: int, call: dict[str, Any], outputs: Any, max_chars: int, losses: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The programs a compile started from, evaluated or returned, in the order it met them, each with the candidates it
    was made from (the optimizer's lineage where it reports one, else the student) and what it changed from the first."""
    student = call.get("student_fingerprint")
    evaluated = [c.get("program_fingerprint") for i, c in enumerate(run.calls) if c.get("call") == "evaluate" and i != index and _below(run.calls, i, index)]
    lineage = _lineage(outputs, run) if outputs is not None else None
    reported = lineage[0] if lineage is not None else []
    order = list(dict.fromkeys(f for f in [student, *reported, *evaluated, call.get("program_fingerprint")] if f is not None))
    if not order:
        return []
    made_from, scores = (lineage[1], lineage[2]) if lineage is not None else ({}, {})
    position = {fingerprint: i for i, fingerprint in enumerate(order)}
    out = []
    for i, fingerprint in enumerate(order):
        parents = made_from.get(fingerprint)
        if parents is None:  # an optimizer that reports no lineage makes every candidate from the student
            parents = [student] if student is not None and fingerprint != student else []
        indices = [position[p] for p in parents if p in position]
        first = run.learnable.get(order[indices[0]]) if indices else None
        out.append({
            "program_fingerprint": fingerprint,
            "parent_candidates": indices,
            "state_changes": _state_changes(run.learnable.get(fingerprint), first, max_chars, losses, f"candidates[{i}].state_changes"),
            "score": scores.get(fingerprint),
        })  # fmt: skip
    return out


def _below(calls: list[dict[str, Any]], index: int, ancestor: int) -> bool:
    """Whether the recorded ``calls[index]`` is ``ancestor`` or below it."""
    current: int | None = index
    while current is not None:
        if current == ancestor:
            return True
        current = calls[current].get("parent_call")
    return False


def _example_results(result: Any, run: _Run, index: int, max_chars: int, losses: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Each (example, prediction, score) of an ``EvaluationResult``, as recorded, linked to the program call that
    produced it."""
    by_output = {id(out): i for i, out in run.outputs.items() if _below(run.calls, i, index)}
    out = []
    for position, item in enumerate(getattr(result, "results", None) or []):
        try:
            example, prediction, score = item
        except (TypeError, ValueError):
            losses.append(loss(f"calls[{index}].example_results[{position}]", "not an (example, prediction, score) triple; left out"))
            continue
        out.append({
            "example": summarize(example, max_chars=max_chars, losses=losses, path=f"calls[{index}].example_results[{position}].example"),
            "prediction": summarize(prediction, max_chars=max_chars, losses=losses, path=f"calls[{index}].example_results[{position}].prediction"),
            "score": _number(score),
            "program_call": by_output.get(id(prediction)),
        })
    return out


def _returned_tool_calls(outputs: Any, losses: list[dict[str, str]]) -> list[ReturnedCall]:
    """The ``dspy.ToolCall`` objects in the ``dspy.ToolCalls`` values a module returned, as plain data."""
    values = outputs.values() if hasattr(outputs, "values") and hasattr(outputs, "keys") else ()
    found = []
    for value in values:
        if type(value).__name__ == "ToolCalls":
            for position, call in enumerate(getattr(value, "tool_calls", None) or []):
                path = f"returned_tool_calls[{position}]"
                call_id = getattr(call, "id", None)
                found.append(ReturnedCall(
                    name=text_of(getattr(call, "name", ""), f"{path}.name", losses),
                    call_id=None if call_id is None else text_of(call_id, f"{path}.id", losses),
                    args=json_data(getattr(call, "args", None) or {}, path=f"{path}.args", losses=losses),
                ))  # fmt: skip
    return found

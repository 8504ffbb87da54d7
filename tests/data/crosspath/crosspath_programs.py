"""The three DSPy programs of the cross-producer fixtures, run offline on the real ``dspy.LM`` (LiteLLM
``mock_response`` / ``mock_tool_calls``, :mod:`lms`), and a :class:`Ledger` that writes down what they really did
(LM calls, their failures, usage and cost; tool executions; module calls) from the programs themselves, not from any
recorder:

1. ``react``: ``dspy.ReAct`` with ``add`` and ``divide``; ``divide`` by zero raises (``tests/traced_programs.py``);
2. ``native``: native parallel tool calls, the model asks for ``add`` and ``divide`` in one response and
   ``CallTools`` runs both, ``divide`` raises (``tests/traced_programs.py``);
3. ``nested``: ``DraftThenAnswer``, a module calling two ``dspy.ChainOfThought``: the first one's LM call fails (the
   provider answers 503: LiteLLM's ``mock_response`` is an exception with that status, :class:`ProviderOverloaded`;
   LiteLLM retries it, DSPy wraps it in ``dspy.LMError`` and the ``ChatAdapter`` does not fall back to the
   ``JSONAdapter`` on an ``LMError``), the module catches it and the second one answers.

Each program is one top-level call: one trace per program per recorder.
"""

from __future__ import annotations

import contextvars
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM would fetch its price map at import
TESTS = Path(__file__).resolve().parents[2]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import dspy  # noqa: E402
from lms import MODEL, ScriptedLM, fields  # noqa: E402
from traced_programs import NATIVE, QUESTION_NATIVE, QUESTION_REACT, REACT, CallTools  # noqa: E402


class ProviderOverloaded(Exception):
    """The provider's answer to the failing LM call. Given as ``mock_response``, LiteLLM raises it as a
    ``litellm.MockException`` with its ``status_code``, which LiteLLM maps to ``litellm.ServiceUnavailableError``,
    retries ``num_retries`` (3) times, and DSPy wraps in ``dspy.LMServerError``. A plain exception, not LiteLLM's own
    ``ServiceUnavailableError``: DSPy 3.4 copies the call's arguments, and that one cannot be copied (DSPy 3.4.1 then
    raises ``LMUnexpectedError`` about its constructor instead)."""

    status_code = 503


QUESTION_NESTED = "What is the capital of France?"
NESTED = [
    ProviderOverloaded("The server is overloaded, try again later."),
    fields(reasoning="No draft came back; Paris is the capital of France.", answer="Paris"),
]
PROGRAMS = ("react", "native", "nested")
QUESTIONS = {"react": QUESTION_REACT, "native": QUESTION_NATIVE, "nested": QUESTION_NESTED}


def add(a: int, b: int) -> int:
    """Add two integers."""
    run = Ledger.tool_started("add", a=a, b=b)
    return Ledger.tool_returned(run, a + b)


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    run = Ledger.tool_started("divide", a=a, b=b)
    try:
        return Ledger.tool_returned(run, a / b)
    except ZeroDivisionError as err:
        Ledger.tool_raised(run, err)
        raise


class DraftThenAnswer(dspy.Module):
    """Drafts an answer with one ``ChainOfThought``, then answers with a second one given the draft; when the
    drafting LM call fails (``dspy.LMError``) the module goes on without a draft."""

    def __init__(self) -> None:
        super().__init__()
        self.draft = dspy.ChainOfThought("question -> draft")
        self.answer = dspy.ChainOfThought("question, draft -> answer")

    def forward(self, question: str):
        try:
            draft = self.draft(question=question).draft
        except dspy.LMError as err:
            draft = f"(no draft: {type(err).__name__})"
        return self.answer(question=question, draft=draft)


def _qualified(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _plain(value: Any) -> Any:
    """``value`` as JSON data (the ledger keeps tool arguments and results so)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


_PARENT: contextvars.ContextVar[int | None] = contextvars.ContextVar("crosspath_ledger_parent", default=None)


class Ledger:
    """What one program run really did, written down by the program's own objects: the LM's ``forward`` (every LM
    call, whether it raised, and LiteLLM's attempts at it), the tools' functions (every execution, its arguments and
    whether it raised) and the modules' ``forward`` (every module call, its parent, whether it raised)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lm_calls: list[dict[str, Any]] = []
        self.tool_runs: list[dict[str, Any]] = []
        self.module_calls: list[dict[str, Any]] = []
        self.lms: list[LedgerLM] = []
        self.attempts = 0

    # -- modules --

    def watch(self, program: dspy.Module) -> dspy.Module:
        """Wrap ``forward`` of ``program`` and of each of its sub-modules (on the instance, so that nothing else sees
        a change) and ReAct's ``finish`` tool; make this the ledger the tools write to."""
        for path, module in program.named_sub_modules():
            self._watch_module(path, module)
        tools = getattr(program, "tools", None)
        if isinstance(program, dspy.ReAct) and isinstance(tools, dict) and isinstance(tools.get("finish"), dspy.Tool):
            tools["finish"].func = self._tool_function("finish", tools["finish"].func)
        Ledger.current = self
        return program

    def _watch_module(self, path: str, module: dspy.Module) -> None:
        ledger = self

        def forward(*args, **kwargs):
            parent = _PARENT.get()
            record = {
                "path": path,
                "class": type(module).__name__,
                "qualified_class": _qualified(module),
                "parent": parent,
                "raised": None,
            }
            ledger.module_calls.append(record)
            token = _PARENT.set(len(ledger.module_calls) - 1)
            try:
                return type(module).forward(module, *args, **kwargs)  # looked up now: instrumentation may wrap it
            except BaseException as err:
                record["raised"] = _qualified(err)
                raise
            finally:
                _PARENT.reset(token)

        object.__setattr__(module, "forward", forward)

    # -- tools --

    current: Ledger | None = None  # the ledger of the program running now

    @classmethod
    def tool_started(cls, name: str, **args: Any) -> dict[str, Any]:
        """A tool's function writes its execution down itself: a wrapper would be a frame of the traceback that
        ``dspy.ReAct`` sends back to the model."""
        run = {"name": name, "args": _plain(args), "raised": None, "result": None}
        if cls.current is not None:
            cls.current.tool_runs.append(run)
        return run

    @staticmethod
    def tool_returned(run: dict[str, Any], result: Any) -> Any:
        run["result"] = _plain(result)
        return result

    @staticmethod
    def tool_raised(run: dict[str, Any], err: BaseException) -> None:
        run["raised"] = _qualified(err)
        run["error"] = str(err)

    def _tool_function(self, name: str, func):
        """ReAct's own ``finish`` tool (it cannot raise: no frame of a wrapper shows in a traceback)."""

        @functools.wraps(func)
        def run(*args, **kwargs):
            return Ledger.tool_returned(Ledger.tool_started(name, **kwargs), func(*args, **kwargs))

        return run

    # -- LM --

    def lm(self, script: list) -> LedgerLM:
        lm = LedgerLM(self, script)
        self.lms.append(lm)
        return lm

    def facts(self, outcome: Any) -> dict[str, Any]:
        """The ledger as facts: ``lm.history`` holds an entry per successful call, in order."""
        entries = [entry for lm in self.lms for entry in lm.history]
        ok = [call for call in self.lm_calls if call["error"] is None]
        assert len(entries) == len(ok), (len(entries), len(ok))
        for call, entry in zip(ok, entries):
            call["usage"] = _plain(dict(entry.get("usage") or {}))
            call["cost"] = entry.get("cost")
            call["response_model"] = entry.get("response_model")
            call["history_uuid"] = entry.get("uuid")
        usage_keys = ("prompt_tokens", "completion_tokens", "total_tokens")
        modules: dict[str, dict[str, Any]] = {}
        for call in self.module_calls:
            seen = modules.setdefault(call["qualified_class"], {"class": call["class"], "calls": 0, "raised": 0})
            seen["calls"] += 1
            seen["raised"] += call["raised"] is not None
        tools: dict[str, dict[str, int]] = {}
        for run in self.tool_runs:
            seen = tools.setdefault(run["name"], {"runs": 0, "raised": 0})
            seen["runs"] += 1
            seen["raised"] += run["raised"] is not None
        return {
            "question": QUESTIONS[self.name],
            "top_module": {"class": self.module_calls[0]["class"], "qualified_class": self.module_calls[0]["qualified_class"]},
            "model": MODEL,
            "lm_calls": len(self.lm_calls),
            "lm_calls_failed": sum(call["error"] is not None for call in self.lm_calls),
            "lm_calls_ok": len(ok),
            "tokens": {key: sum((call["usage"].get(key) or 0) for call in ok) for key in usage_keys},
            "cost": sum(call["cost"] or 0 for call in ok),
            "litellm_attempts": self.attempts,
            "lm_call_list": self.lm_calls,
            "tool_executions": len(self.tool_runs),
            "tool_executions_raised": sum(run["raised"] is not None for run in self.tool_runs),
            "tools": tools,
            "tool_runs": self.tool_runs,
            "module_calls": len(self.module_calls),
            "module_classes": modules,
            "module_call_list": self.module_calls,
            "outcome": _plain({k: v for k, v in outcome.items()}) if outcome is not None else None,
        }


class LedgerLM(ScriptedLM):
    """:class:`lms.ScriptedLM` whose script may also hold an exception (LiteLLM's ``mock_response`` raises it, as a
    provider's error would be), writing each call down in its :class:`Ledger`."""

    def __init__(self, ledger: Ledger, script: list, **kwargs) -> None:
        super().__init__(script, **kwargs)
        self.ledger = ledger

    def forward(self, prompt=None, messages=None, **kwargs):
        step = self.script[0]
        record = {"index": len(self.ledger.lm_calls), "started": time.time(), "tools_offered": [t["function"]["name"] for t in kwargs.get("tools") or []]}
        record["kind"] = "exception" if isinstance(step, BaseException) else "text" if isinstance(step, str) else "tool_calls"
        record["error"] = None
        self.ledger.lm_calls.append(record)
        try:
            if isinstance(step, BaseException):
                self.script.pop(0)
                kwargs["mock_response"] = step
                return dspy.LM.forward(self, prompt=prompt, messages=messages, **kwargs)
            return super().forward(prompt=prompt, messages=messages, **kwargs)
        except BaseException as err:
            record["error"] = {"class": _qualified(err), "message": str(err)}
            raise
        finally:
            record["ended"] = time.time()


def _count_attempts() -> None:
    """Count LiteLLM's own attempts (its retries of a failed call happen inside one ``dspy.LM`` call): every mock
    answer passes through ``litellm.main._handle_mock_potential_exceptions``, when this LiteLLM has it."""
    import litellm.main as main

    original = getattr(main, "_handle_mock_potential_exceptions", None)
    if original is None or getattr(original, "_crosspath", False):
        return

    def counted(*args, **kwargs):
        if Ledger.current is not None:
            Ledger.current.attempts += 1
        return original(*args, **kwargs)

    counted._crosspath = True
    main._handle_mock_potential_exceptions = counted


def run_programs() -> dict[str, dict[str, Any]]:
    """Run the three programs, one top-level call each, in the order of :data:`PROGRAMS`; the facts of each, by
    program name."""
    _count_attempts()
    facts: dict[str, dict[str, Any]] = {}
    for name in PROGRAMS:
        ledger = Ledger(name)
        if name == "react":
            program, script, adapter = dspy.ReAct("question -> answer", tools=[add, divide]), REACT, None
        elif name == "native":
            program, script, adapter = CallTools(tools=(add, divide)), NATIVE, dspy.ChatAdapter(use_native_function_calling=True)
        else:
            program, script, adapter = DraftThenAnswer(), NESTED, None
        ledger.watch(program)
        with dspy.context(lm=ledger.lm(script), **({"adapter": adapter} if adapter else {})):
            outcome = program(question=QUESTIONS[name])
        facts[name] = ledger.facts(outcome)
    Ledger.current = None
    return facts

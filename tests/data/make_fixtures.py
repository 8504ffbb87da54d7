"""Regenerate the DSPy 3.3.1 fixtures in tests/data/ from real DSPy objects and real DSPy runs.

    python tests/data/make_fixtures.py
    python tests/data/make_fixtures.py --portable-paths   # only make the bundled set's file paths portable

Every file is ``model_dump(mode="json")`` output of DSPy 3.3.1 objects: typed parts built with DSPy's own
classes (one of each kind, every optional field set somewhere), and history entries written by real
programs run offline with ``dspy.utils.DummyLM``.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

import dspy
from dspy.core.types import (
    LMAudioPart,
    LMBinaryPart,
    LMCacheConfig,
    LMCitationPart,
    LMConfig,
    LMDocumentPart,
    LMHistoryEntry,
    LMImagePart,
    LMMessage,
    LMOutput,
    LMPromptCacheConfig,
    LMReasoningConfig,
    LMRefusalPart,
    LMRequest,
    LMResponse,
    LMTextPart,
    LMThinkingPart,
    LMToolCallPart,
    LMToolChoice,
    LMToolResultPart,
    LMToolSpec,
    LMUsage,
    LMVideoPart,
)

HERE = Path(__file__).parent
assert dspy.__version__ == "3.3.1", dspy.__version__

PARTS = {
    "text": LMTextPart(text="Héllo, \"world\" \\ <tag> #1\nline 2 — 🙂", metadata={"lang": "en", "nested": {"a": [1, 2.5, None, True]}}),
    "image": LMImagePart(url="https://example.com/cat.png", detail="high", metadata={"source": "web"}),
    "audio": LMAudioPart(data="UklGRiQAAABXQVZF", media_type="audio/wav"),
    "video": LMVideoPart(file_id="file-video-1", media_type="video/webm"),
    "document": LMDocumentPart(
        path="/tmp/report.pdf", title="Quarterly report", context="Finance team", citations={"enabled": True}
    ),
    "binary": LMBinaryPart(data="AAECAw==", filename="blob.bin", media_type="application/octet-stream"),
    "tool_call": LMToolCallPart(
        id="call 1 \"quoted\" <x>\n#%",
        name="search web",
        args={"query": "DSPy ünïcödé", "limit": 12345678901234567890123456789012345678901, "filters": {"deep": [[{"x": ""}]]}},
        provider_data={"index": 0, "raw": {"type": "function"}},
        metadata={"stream": False},
    ),
    "tool_result": LMToolResultPart(
        call_id="call 1 \"quoted\" <x>\n#%",
        name="search web",
        content=[LMTextPart(text="result text"), LMImagePart(data="iVBORw0KGgo=", media_type="image/png")],
        is_error=True,
        provider_data={"status": 500},
    ),
    "thinking": LMThinkingPart(text="Let me think: 2 + 2 = 4.", redacted=True),
    "citation": LMCitationPart(text="quoted passage", title="Source", url="https://example.com/doc#p1", metadata={"page": 3}),
    "refusal": LMRefusalPart(text="I can't help with that."),
}


def request_with_everything() -> LMRequest:
    return LMRequest(
        model="openai/gpt-4o-mini",
        messages=[
            LMMessage(role="system", parts=[PARTS["text"]], metadata={"turn": 0}),
            LMMessage(role="user", parts=[PARTS[k] for k in ("image", "audio", "video", "document", "binary")], name="alice"),
            LMMessage(role="assistant", parts=[PARTS["thinking"], PARTS["tool_call"]]),
            LMMessage(role="tool", parts=[PARTS["tool_result"]]),
            LMMessage(role="user", parts=[LMTextPart(text="")]),
        ],
        tools=[
            LMToolSpec(
                name="search web",
                description="Search the web.",
                parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
                strict=True,
                metadata={"owner": "team"},
                provider_data={"cache_control": {"type": "ephemeral"}},
            ),
            LMToolSpec(name="noop"),
        ],
        config=LMConfig(
            temperature=0.7,
            max_tokens=512,
            top_p=0.95,
            stop=["\n\n", "END"],
            n=2,
            logprobs=5,
            response_format={"type": "json_object"},
            reasoning=LMReasoningConfig(effort="high", max_tokens=1024, summary="auto"),
            tool_choice=LMToolChoice(mode="required", allowed=["search web"], parallel=False),
            cache=LMCacheConfig(enabled=True, rollout_id=7),
            prompt_cache=LMPromptCacheConfig(enabled=True, key="prefix-1"),
            extensions={"seed": 42, "user": "u-1"},
        ),
        metadata={"module": "ReAct"},
    )


def response_with_everything() -> LMResponse:
    return LMResponse(
        model="gpt-4o-mini-2024-07-18",
        outputs=[
            LMOutput(
                parts=[PARTS["thinking"], PARTS["text"], PARTS["tool_call"], PARTS["citation"]],
                finish_reason="tool_calls",
                logprobs={"content": [{"token": "Hi", "logprob": -0.01}]},
                provider_data={"index": 0},
                metadata={"candidate": 0},
            ),
            LMOutput(parts=[PARTS["refusal"]], finish_reason="content_filter", truncated=True),
        ],
        usage=LMUsage(
            prompt_tokens=1200,
            completion_tokens=34,
            reasoning_tokens=10,
            cache_read_tokens=1000,
            cache_write_tokens=0,
            input_audio_tokens=3,
            output_audio_tokens=4,
            details={"prompt_tokens_details": {"cached_tokens": 1000}},
            provider_cost_usd=0.00123,  # an extra field: LMUsage allows extras
        ),
        cost=0.000123456789,
        cache_hit=False,
        response_id="chatcmpl-123",
        provider_data={"system_fingerprint": "fp_1"},
        metadata={"latency_ms": 812},
    )


class ScriptedLM(dspy.BaseLM):
    """A typed DSPy 3.3 LM that answers from a script, so real programs run offline and DSPy itself writes
    typed ``LMHistoryEntry`` objects (``dspy.utils.DummyLM`` writes legacy dicts instead)."""

    forward_contract = "typed_lm"

    def __init__(self, script: list[LMResponse]) -> None:
        super().__init__(model="scripted/typed-lm", cache=False)
        self.script = list(script)

    def forward(self, request: LMRequest) -> LMResponse:
        return self.script.pop(0)


def _text(text: str, prompt_tokens: int, completion_tokens: int) -> LMResponse:
    return LMResponse(
        model="scripted-1",
        outputs=[LMOutput(parts=[LMTextPart(text=text)], finish_reason="stop")],
        usage=LMUsage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        cost=prompt_tokens * 1e-7 + completion_tokens * 4e-7,
    )


def react_history() -> list[LMHistoryEntry]:
    """A real dspy.ReAct run with two tools, one of which raises."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    def step(thought: str, tool: str, args: str) -> str:
        return f"[[ ## next_thought ## ]]\n{thought}\n\n[[ ## next_tool_name ## ]]\n{tool}\n\n[[ ## next_tool_args ## ]]\n{args}\n\n[[ ## completed ## ]]"

    lm = ScriptedLM(
        [
            _text(step("Add first.", "add", '{"a": 2, "b": 3}'), 410, 31),
            _text(step("Now divide by zero.", "divide", '{"a": 5, "b": 0}'), 480, 33),
            _text(step("That failed; finish.", "finish", "{}"), 560, 20),
            _text("[[ ## reasoning ## ]]\n2 + 3 = 5\n\n[[ ## answer ## ]]\n5\n\n[[ ## completed ## ]]", 600, 25),
        ]
    )
    with dspy.context(lm=lm):
        dspy.ReAct("question -> answer", tools=[add, divide])(question="What is 2 + 3, divided by 0?")
    return lm.history


def tool_calling_history() -> list[LMHistoryEntry]:
    """A native tool-calling turn and its follow-up with the tool result, through DSPy's typed LM API."""
    call = LMToolCallPart(id="call_w1", name="weather", args={"city": "Paris"})
    lm = ScriptedLM(
        [
            LMResponse(
                model="scripted-1",
                outputs=[LMOutput(parts=[LMThinkingPart(text="I need the weather."), call], finish_reason="tool_calls")],
                usage=LMUsage(input_tokens=52, output_tokens=12),
                response_id="resp-1",
                cost=0.0001,
            ),
            _text("It is sunny in Paris.", 70, 8),
        ]
    )
    weather = LMToolSpec(
        name="weather",
        description="Get the weather of a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    with dspy.context(experimental=True):
        question = dspy.User("What is the weather in Paris?")
        lm(question, tools=[weather], temperature=0.0)
        lm(question, dspy.Assistant(call), dspy.ToolResult("sunny", call_id="call_w1", name="weather"), tools=[weather])
    return lm.history


def dummy_lm_history() -> list[dict]:
    """History entries written by a real ReAct program run offline with DummyLM (legacy dicts)."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    lm = dspy.utils.DummyLM(
        [
            {"next_thought": "I should add.", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 3}},
            {"next_thought": "Done.", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "2 + 3 = 5", "answer": "5"},
        ]
    )
    with dspy.context(lm=lm):
        dspy.ReAct("question -> answer", tools=[add])(question="What is 2 + 3?")
    return [entry.model_dump(mode="json") if hasattr(entry, "model_dump") else entry for entry in lm.history]


BUNDLED = HERE.parents[1] / "src" / "dspy_rdf" / "examples" / "dspy33_traces.jsonl"


def portable(text: str) -> str:
    """``text`` without the file paths of the machine that ran the programs: a traceback in a tool's observation
    names ``site-packages/dspy/...`` and ``tests/data/make_fixtures.py``, as on any machine (the bundled set ships
    with the package)."""
    return text.replace(sysconfig.get_paths()["purelib"] + "/", "site-packages/").replace(str(HERE.parents[1]) + "/", "")


def write(name: str, value) -> None:
    (HERE / name).write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    request = request_with_everything()
    response = response_with_everything()
    write("request_all_parts.json", request.model_dump(mode="json"))
    write("response_all_parts.json", response.model_dump(mode="json"))
    entry = LMHistoryEntry(
        request=request,
        response=response,
        timestamp="2026-11-22T14:05:06.123456",
        uuid="0b6f2c7e-3a51-4c4e-9b0e-1f1e2d3c4b5a",
        model_type="chat",
        trace_tag="extra field kept by LMHistoryEntry",
    )
    write("history_entry_all_parts.json", entry.model_dump(mode="json"))
    for kind, part in PARTS.items():
        single = LMRequest(model="m", messages=[LMMessage(role="user", parts=[part])])
        write(f"part_{kind}.json", single.model_dump(mode="json"))
    write("dummylm_react_history_dicts.json", dummy_lm_history())
    react = [e.model_dump(mode="json") for e in react_history()]
    tools = [e.model_dump(mode="json") for e in tool_calling_history()]
    write("react_history.json", react)
    lines = [*react, *tools, request.model_dump(mode="json"), response.model_dump(mode="json"), entry.model_dump(mode="json")]
    text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in lines)
    # The bundled set ships with the package for `dspy-rdf demo`; tests read it from there.
    BUNDLED.write_text(portable(text), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--portable-paths"]:
        BUNDLED.write_text(portable(BUNDLED.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        main()

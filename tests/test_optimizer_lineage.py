"""Optimizer lineage, recorded live from real optimizer runs on the real ``dspy.LM`` (offline: LiteLLM's mock
responses): each compile's candidates (by fingerprint), the candidates each was made from, what its instructions and
demos changed, and the optimizer's own scores, checked against the optimizer's own result object; then the canned
lineage queries and the PROV view on a store, and the candidates through every way a trace is written and read back."""

from __future__ import annotations

import json
from decimal import Decimal

import dspy
import pyoxigraph as ox
import pytest

from dspy_rdf.analytics.catalog import run_query
from dspy_rdf.canonical import model as m
from dspy_rdf.canonical.identity import trace_iri
from dspy_rdf.capture.recorder import MemorySink, TraceRecorder, program_fingerprint
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.interop.prov import PROV, prov_view, validate_prov
from dspy_rdf.sources.run_json import run_from_json, run_to_json
from dspy_rdf.store import EmbeddedStore

INSTRUCTION = "Answer with a number only."
ANSWER = "[[ ## answer ## ]]\n4\n\n[[ ## completed ## ]]"
# one mock for the student and for MIPROv2's instruction proposer: each reads the fields its own signature asks for
ANSWER_AND_PROPOSAL = f"[[ ## answer ## ]]\n4\n\n[[ ## proposed_instruction ## ]]\n{INSTRUCTION}\n\n[[ ## completed ## ]]"


def _examples(count: int) -> list[dspy.Example]:
    return [dspy.Example(question=f"{i} + {4 - i}?", answer="4").with_inputs("question") for i in range(count)]


def _compiles(trace: m.Trace) -> list[m.CompileCall]:
    return [c for c in trace.calls if isinstance(c, m.CompileCall)]


def _record(run) -> tuple[m.Trace, object]:
    """Run ``run()`` (an optimizer's compile) under a recorder; the one trace it made and what the compile returned."""
    sink = MemorySink()
    recorder = TraceRecorder(sink)
    with dspy.context(callbacks=[recorder]):
        compiled = run()
    assert recorder.errors == [] and len(sink.traces) == 1, recorder.errors
    return sink.traces[0], compiled


@pytest.fixture(scope="module")
def gepa_run():
    """A GEPA run whose reflection proposes an instruction that the metric scores higher (it reads the prompt the
    program sent), so that GEPA keeps a second candidate made from the first."""
    student_lm = dspy.LM("openai/gpt-4o-mini", mock_response=ANSWER, cache=False)
    # DSPy 3.4 reads the JSON's new_instruction (its JSONAdapter); DSPy 3.3 takes the whole text, the instruction in it
    reflection_lm = dspy.LM("openai/gpt-4o", mock_response=json.dumps({"new_instruction": INSTRUCTION}), cache=False)

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        sent = json.dumps(student_lm.history[-1]["messages"]) if student_lm.history else ""
        return dspy.Prediction(score=1.0 if INSTRUCTION in sent else 0.5, feedback=f"Say: {INSTRUCTION}")

    train = _examples(4)
    optimizer = dspy.GEPA(metric=metric, reflection_lm=reflection_lm, max_metric_calls=24, track_stats=True, num_threads=1, reflection_minibatch_size=2)
    with dspy.context(lm=student_lm):
        return _record(lambda: optimizer.compile(dspy.Predict("question -> answer"), trainset=train, valset=train[:2]))


def test_gepa_candidates_parents_and_scores_are_the_optimizers_own(gepa_run):
    trace, compiled = gepa_run
    result = compiled.detailed_results
    assert len(result.candidates) >= 2, "the run should have kept a second candidate"
    [compile_call] = _compiles(trace)
    fingerprints = [program_fingerprint(c) for c in result.candidates]
    recorded = [c.program_fingerprint for c in compile_call.candidates]
    assert recorded[: len(fingerprints)] == fingerprints  # the student is GEPA's candidate 0
    assert compile_call.student_fingerprint == fingerprints[0] and compile_call.program_fingerprint == fingerprints[result.best_idx]
    for i, candidate in enumerate(compile_call.candidates[: len(fingerprints)]):
        assert candidate.parent_candidates == sorted({p for p in result.parents[i] if p is not None}), i
        assert candidate.score == pytest.approx(result.val_aggregate_scores[i])
    best = compile_call.candidates[result.best_idx]
    [(predictor, changed)] = best.state_changes.items()  # type: ignore[union-attr]
    assert predictor == "self" and set(changed) == {"instructions"} and INSTRUCTION in changed["instructions"]
    assert changed["instructions"] == result.candidates[result.best_idx].signature.instructions
    assert [e.example["question"] for e in compile_call.training_examples] == [e.question for e in _examples(4)]  # type: ignore[index]
    assert "trainset" not in (compile_call.input_summary or {})  # kept once, example by example
    assert compile_call.candidates[0].state_changes is None  # the student has no parent to differ from


def _lm_cost(call: m.Call) -> Decimal:
    assert isinstance(call, m.LMCall) and call.entry is not None and call.entry.response is not None
    return Decimal(str(call.entry.response.cost or 0))


def _under(trace: m.Trace, index: int, ancestor: int) -> bool:
    current: int | None = index
    while current is not None:
        if current == ancestor:
            return True
        current = trace.calls[current].parent_call
    return False


def _expected_costs(trace: m.Trace, compile_index: int) -> dict[str, tuple[Decimal, Decimal]]:
    """Per candidate fingerprint, from the model: the cost of the LM calls of its evaluations, and that of the LM calls
    outside evaluations just before its first evaluation (no evaluation between), or, for a returned program never
    evaluated, after the last evaluation."""
    evaluations = [i for i, c in enumerate(trace.calls) if isinstance(c, m.EvaluateCall) and _under(trace, i, compile_index)]
    outside = [n for n, c in enumerate(trace.calls) if isinstance(c, m.LMCall) and _under(trace, n, compile_index)
               and not any(_under(trace, n, e) for e in evaluations)]  # fmt: skip
    first: dict[str, int] = {}
    for i in evaluations:
        first.setdefault(trace.calls[i].program_fingerprint, i)  # type: ignore[union-attr, arg-type]
    out: dict[str, tuple[Decimal, Decimal]] = {}
    for fingerprint, start in first.items():
        evaluating = sum((_lm_cost(c) for n, c in enumerate(trace.calls) if isinstance(c, m.LMCall) and any(
            _under(trace, n, e) and trace.calls[e].program_fingerprint == fingerprint for e in evaluations)), Decimal(0))  # type: ignore[union-attr]  # fmt: skip
        before = max((e for e in evaluations if e < start), default=-1)
        out[fingerprint] = (evaluating, sum((_lm_cost(trace.calls[n]) for n in outside if before < n < start), Decimal(0)))
    returned = trace.calls[compile_index].program_fingerprint  # type: ignore[union-attr]
    if returned is not None and returned not in first:
        last = max(evaluations, default=-1)
        out[returned] = (Decimal(0), sum((_lm_cost(trace.calls[n]) for n in outside if n > last), Decimal(0)))
    return out


@pytest.fixture(scope="module")
def gepa_store(gepa_run, tmp_path_factory):
    with EmbeddedStore(tmp_path_factory.mktemp("lineage") / "store") as store:
        store.put([gepa_run[0]])
        yield store


def test_the_lineage_query_follows_the_returned_program_back_to_the_student(gepa_run, gepa_store):
    trace, compiled = gepa_run
    result = compiled.detailed_results
    chain = [result.best_idx]
    while (parents := [p for p in result.parents[chain[-1]] if p is not None]):
        chain.append(parents[0])
    rows = run_query(gepa_store, "candidate_lineage").records()
    assert [r["program"] for r in rows] == [program_fingerprint(result.candidates[i]) for i in reversed(chain)]
    assert [r["ancestors"] for r in rows] == list(range(len(chain)))
    costs = _expected_costs(trace, trace.calls.index(_compiles(trace)[0]))
    for row in rows:
        evaluating, making = costs[row["program"]]
        assert Decimal(str(row["evaluation_cost"])) == evaluating and Decimal(str(row["making_cost"])) == making, row
        assert row["optimizer_score"] == pytest.approx(result.val_aggregate_scores[[program_fingerprint(c) for c in result.candidates].index(row["program"])])
    assert sum(costs[r["program"]][1] for r in rows) > 0  # the reflection LM's calls made the second candidate


def test_the_gain_query_gives_each_steps_score_gain_per_dollar(gepa_run, gepa_store):
    _, compiled = gepa_run
    result = compiled.detailed_results
    scores = {program_fingerprint(c): s for c, s in zip(result.candidates, result.val_aggregate_scores)}
    rows = run_query(gepa_store, "candidate_gains").records()
    assert rows
    for row in rows:
        assert row["gain"] == pytest.approx(scores[row["program"]] - scores[row["parent_program"]])
        assert row["cost"] > 0 and row["gain_per_dollar"] == pytest.approx(row["gain"] / row["cost"])


def test_the_prov_view_derives_each_candidate_from_its_parents(gepa_run, gepa_store):
    trace, compiled = gepa_run
    iri = trace_iri(trace)
    [(_, triples)] = prov_view(gepa_store, [iri])
    memory = ox.Store()
    memory.extend(ox.Quad(t.subject, t.predicate, t.object, ox.DefaultGraph()) for t in triples)
    [compile_call] = _compiles(trace)
    at = trace.calls.index(compile_call)
    best = compile_call.program_fingerprint
    best_node = f"{iri}/call/{at}/candidate/{[c.program_fingerprint for c in compile_call.candidates].index(best)}"
    sources = {r["s"].value for r in memory.query(f"SELECT ?s WHERE {{ <{best_node}> <{PROV}wasDerivedFrom>+ ?s }}")}
    assert f"{iri}/call/{at}/candidate/0" in sources
    used = {r["e"].value for r in memory.query(f"SELECT ?e WHERE {{ <{iri}/call/{at}> <{PROV}used> ?e }}")}
    examples = {f"{iri}/call/{at}/training_example/{i}" for i in range(len(compile_call.training_examples))}
    assert len(examples) == 4 and used == {f"{iri}/call/{at}/candidate/0"} | examples  # the student and the trainset
    assert examples <= sources  # the program returned was made from the training examples too
    generated = {r["e"].value for r in memory.query(f"SELECT ?e WHERE {{ ?e <{PROV}wasGeneratedBy> <{iri}/call/{at}> }}")}
    assert generated == {f"{iri}/call/{at}/candidate/{i}" for i in range(1, len(compile_call.candidates))}
    conforms, report = validate_prov(triples)
    assert conforms, report


def test_candidates_come_back_the_same_from_every_written_form(gepa_run, tmp_path):
    trace, _ = gepa_run
    assert _compiles(run_from_json(json.loads(json.dumps(run_to_json(trace))))) == _compiles(trace)
    source = tmp_path / "run.json"
    source.write_text(json.dumps(run_to_json(trace)), encoding="utf-8")
    for suffix in ("nq", "ttl", "trig", "jsonld"):
        out = tmp_path / f"run.{suffix}"
        assert main(["export", str(source), "-o", str(out)]) == 0
        [item] = list(read_traces(out))
        assert _compiles(item.trace) == _compiles(trace), suffix  # candidates and training examples included


def test_a_parent_that_is_no_candidate_is_refused_naming_where(gepa_run):
    from dspy_rdf.canonical.errors import TraceInputError

    document = run_to_json(gepa_run[0])
    call = next(c for c in document["calls"] if c["call"] == "compile")
    call["candidates"][1]["parent_candidates"] = [7]
    with pytest.raises(TraceInputError, match=r"candidates\[1\]\.parent_candidates\[0\]"):
        run_from_json(document)


def test_bootstrap_few_shot_makes_its_program_from_the_student_with_demos(tmp_path):
    lm = dspy.LM("openai/gpt-4o-mini", mock_response=ANSWER, cache=False)
    optimizer = dspy.BootstrapFewShot(metric=lambda gold, pred, trace=None: pred.answer == gold.answer, max_bootstrapped_demos=2, max_labeled_demos=0)
    with dspy.context(lm=lm):
        trace, compiled = _record(lambda: optimizer.compile(dspy.Predict("question -> answer"), trainset=_examples(3)))
    [compile_call] = _compiles(trace)
    student, made = compile_call.candidates
    assert student.program_fingerprint == compile_call.student_fingerprint and student.parent_candidates == []
    assert made.program_fingerprint == compile_call.program_fingerprint == program_fingerprint(compiled) and made.parent_candidates == [0]
    [predictor] = compiled.predictors()
    assert len(made.state_changes["self"]["demos"]) == len(predictor.demos) == 2  # type: ignore[index]
    # never evaluated: what made it is every LM call of the compile (the teacher's runs that gave the demos)
    with EmbeddedStore(tmp_path / "store") as store:
        store.put([trace])
        rows = {r["program"]: r for r in run_query(store, "candidate_lineage").records()}
    expected = _expected_costs(trace, trace.calls.index(compile_call))
    assert set(rows) == {student.program_fingerprint, made.program_fingerprint}
    assert Decimal(str(rows[made.program_fingerprint]["making_cost"])) == expected[made.program_fingerprint][1] > 0
    assert sum(_lm_cost(c) for c in trace.calls if isinstance(c, m.LMCall)) == expected[made.program_fingerprint][1]


def test_miprov2_candidates_are_the_programs_it_evaluated_each_made_from_the_student():
    pytest.importorskip("optuna", reason="MIPROv2 needs optuna (in the test install: pip install -e '.[test]')")
    lm = dspy.LM("openai/gpt-4o-mini", mock_response=ANSWER_AND_PROPOSAL, cache=False)
    optimizer = dspy.MIPROv2(metric=lambda gold, pred, trace=None: pred.answer == gold.answer, prompt_model=lm, task_model=lm, auto=None,
                             num_candidates=2, num_threads=1, verbose=False, max_bootstrapped_demos=1, max_labeled_demos=1)  # fmt: skip
    train = _examples(6)
    with dspy.context(lm=lm):
        trace, compiled = _record(lambda: optimizer.compile(
            dspy.Predict("question -> answer"), trainset=train, valset=train[:3], num_trials=3, minibatch=False,
            program_aware_proposer=False, data_aware_proposer=False, tip_aware_proposer=False,
        ))  # fmt: skip
    outer = next(c for c in _compiles(trace) if c.optimizer_class.endswith("MIPROv2"))
    fingerprints = [c.program_fingerprint for c in outer.candidates]
    assert fingerprints[0] == outer.student_fingerprint and outer.program_fingerprint == program_fingerprint(compiled)
    assert {program_fingerprint(c["program"]) for c in compiled.candidate_programs} <= set(fingerprints)
    assert all(c.parent_candidates == [0] for c in outer.candidates[1:])
    changed = [c.state_changes["self"] for c in outer.candidates[1:] if c.state_changes]  # type: ignore[index]
    assert any(change.get("instructions") == INSTRUCTION for change in changed), changed

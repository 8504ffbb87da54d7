"""Differential tests of the fast SHACL engine (:mod:`dspy_rdf.validation.compiled`, ``.running`` and ``.fast``)
against pySHACL, the reference.

Both engines see the same quads, one named graph per trace, and must report the same set of
``(trace, focus node, path, constraint component, value)``.

The broken data breaks every compiled constraint at least once: for every property shape of every node shape, one
synthetic focus node (in its own graph) per constraint kind (missing value for ``sh:minCount``, a second value for
``sh:maxCount``, a literal of the wrong datatype, an IRI where a literal is expected and a literal where a node is,
a node of the wrong class, a value outside ``sh:in``, ``-1`` for ``sh:minInclusive 0``), an unknown predicate on
every closed shape, and real traces edited the same ways. A coverage check asserts that each of these was reported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyoxigraph as ox
import pytest
import rdflib
from rdflib.collection import Collection
from rdflib.namespace import RDF, SH, XSD

from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf import vocab as v
from dspy_rdf.rdf.formats import serialize_traces
from dspy_rdf.rdf.terms import rdflib_graph as graph_from_ntriples
from dspy_rdf.resources import shapes_dir
from dspy_rdf.sources.tracejson import trace_from_json
from dspy_rdf.store import EmbeddedStore
from dspy_rdf.validation import (
    Engine,
    fast,
    rule_name,
    validate_dataset,
    validate_store,
)
from dspy_rdf.validation import compiled as fastshacl
from dspy_rdf.validation.shapes import CLASSES_FILE
from dspy_rdf.validation.units import TraceGraphs

DATA = Path(__file__).parent / "data"
FIXTURES = ("react_history.json", "request_all_parts.json", "response_all_parts.json", "history_entry_all_parts.json", "history_dicts_dspy3.3.1.json")
BAD = "urn:test:bad/"
XSD_INT = str(XSD.integer)


def _traces():
    out = [item.trace for item in read_traces(bundled_traces_path()) if item.trace is not None]
    for name in FIXTURES:
        out.append(trace_from_json(json.loads((DATA / name).read_text(encoding="utf-8"))))
    return out


@pytest.fixture(scope="module")
def good_nquads() -> bytes:
    return serialize_traces(_traces())


def _key(x) -> tuple:
    return (x.trace, x.focus_node, x.path, x.constraint, x.value)


def _dataset(nquads: bytes) -> ox.Store:
    store = ox.Store()
    store.load(nquads, ox.RdfFormat.N_QUADS)
    return store


def _reference(nquads: bytes):
    return validate_dataset(_dataset(nquads), engine=Engine.PYSHACL)


def _fast(nquads: bytes, tmp_path: Path | None = None):
    if tmp_path is None:
        return validate_dataset(_dataset(nquads))
    store = EmbeddedStore(tmp_path / "store")
    store.oxigraph.load(nquads, ox.RdfFormat.N_QUADS)
    try:
        return validate_store(store, workers=1)
    finally:
        store.close()


def _assert_same(reference, fast) -> None:
    ref = {_key(x) for x in reference.violations}
    got = {_key(x) for x in fast.violations}
    assert reference.conforms == fast.conforms
    assert got - ref == set(), f"only the fast engine reports {sorted(got - ref)[:10]}"
    assert ref - got == set(), f"only pySHACL reports {sorted(ref - got)[:10]}"


# --- the compiler -----------------------------------------------------------------------------------------------------


def test_everything_in_the_shapes_is_compiled():
    compiled = fastshacl.compile_shapes()
    assert compiled.unsupported == ()
    assert fastshacl.compile_shapes() is compiled  # cached per process
    assert any(Path(f).name == "dspy.shacl.ttl" for f in compiled.files)
    assert not any(Path(f).name == CLASSES_FILE for f in compiled.files)
    for check in compiled.checks:  # every query parses, batched or not
        ox.Store().query(check.query(None))
        ox.Store().query(check.query(["urn:x:a", "urn:x:b"]))


def test_sparql_rewrite_wraps_the_where_clause_in_graph():
    query = 'PREFIX d: <urn:d#>\nSELECT $this ?value WHERE { $this d:p ?value . FILTER(?value != "}{") } GROUP BY $this ?value'
    text = fastshacl.wrap_in_graph(query)
    assert "GRAPH ?dspyrdf_g {" in text and f"GROUP BY {fastshacl.G} $this" in text and '"}{"' in text
    ox.Store().query(text.replace("#V#", ""))


# --- conforming data --------------------------------------------------------------------------------------------------


def test_conforming_traces_agree(good_nquads, tmp_path):
    reference = _reference(good_nquads)
    assert reference.conforms, str(reference)
    _assert_same(reference, _fast(good_nquads))
    _assert_same(reference, _fast(good_nquads, tmp_path))


# --- broken data --------------------------------------------------------------------------------------------------------


def _shapes():
    graph = rdflib.Graph()
    for path in sorted(shapes_dir().glob("*.ttl")):
        if path.name != CLASSES_FILE:
            graph.parse(path, format="turtle")
    return graph


def _lit(text: str, datatype: str | None = None) -> str:
    """An N-Quads literal, written as is (rdflib would normalise ill-formed lexical forms away)."""
    quoted = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return quoted + (f"^^<{datatype}>" if datatype else "")


def _good_value(graph: rdflib.Graph, ps) -> str:
    """A value that satisfies the property shape's value constraints (for sh:minCount/sh:maxCount breakage)."""
    in_list = graph.value(ps, SH["in"])
    if in_list is not None:
        return list(Collection(graph, in_list))[0].n3()
    dt = graph.value(ps, SH.datatype)
    if dt is not None:
        sample = {XSD.integer: "1", XSD.boolean: "true", XSD.double: "1.5", XSD.dateTime: "2026-11-22T10:00:00Z", RDF.JSON: "{}"}
        return _lit(sample.get(dt, "x"), None if dt == XSD.string else str(dt))
    cls = graph.value(ps, SH["class"])
    if cls is not None:
        return "<urn:test:good-value-of-" + str(cls).rsplit("/", 1)[-1] + ">"
    return _lit("x")


def _broken_synthetic() -> tuple[bytes, set[tuple[str, str, str]]]:
    """One graph per (property shape, constraint kind) with a focus node that breaks it; and what must be reported
    as ``(focus, path IRI, component)``."""
    graph = _shapes()
    lines: list[str] = []
    expected: set[tuple[str, str, str]] = set()
    n = 0

    def node(cls) -> tuple[str, str]:
        nonlocal n
        n += 1
        return f"<{BAD}g{n}>", f"{BAD}n{n}"

    # the typed nodes that sh:class values point to; each graph that references one holds its type (the fast
    # engine validates each trace's graph on its own, as traces never reference another trace's nodes)
    typed_nodes = {}
    for cls in set(graph.objects(None, SH["class"])):
        local = str(cls).rsplit("/", 1)[-1]
        typed_nodes[f"<urn:test:good-value-of-{local}>"] = cls
        typed_nodes[f"<urn:test:good-value2-of-{local}>"] = cls
    typed_nodes["<urn:test:wrong-class>"] = None
    for shape in sorted(set(graph.subjects(SH.targetClass, None)), key=str):
        cls = graph.value(shape, SH.targetClass)
        shared: dict[tuple, tuple[str, str]] = {}
        for ps in graph.objects(shape, SH.property):
            p = str(graph.value(ps, SH.path))

            variants: dict[str, int] = {}

            def emit(component: str, triples: list[tuple[str, str]], own: bool = False) -> None:
                # one focus node per (shape, constraint kind, variant), shared by the shape's property shapes
                variant = variants[component] = variants.get(component, -1) + 1
                key = (str(shape), component, variant, p if own else "")
                if key not in shared:
                    shared[key] = node(cls)
                    lines.append(f"<{shared[key][1]}> <{RDF.type}> <{cls}> {shared[key][0]} .")
                g, focus = shared[key]
                for pred, obj in triples:
                    lines.append(f"<{focus}> {pred} {obj} {g} .")
                    base = obj.rsplit("-", 1)[0] + ">" if obj.startswith(("<urn:test:good-value", "<urn:test:wrong-class-")) else obj
                    if base in typed_nodes:
                        node_cls = typed_nodes[base] or wrong_class
                        lines.append(f"{obj} <{RDF.type}> <{node_cls}> {g} .")
                expected.add((focus, p, component))

            good = _unique(_good_value(graph, ps), n)
            if graph.value(ps, SH.minCount) is not None:
                emit("MinCountConstraintComponent", [])
            if graph.value(ps, SH.maxCount) is not None:
                other = good.replace("good-value", "good-value2") if good.startswith("<") else None
                second = other or _second(good)
                emit("MaxCountConstraintComponent", [(f"<{p}>", good), (f"<{p}>", second)])
            dt = graph.value(ps, SH.datatype)
            if dt is not None:
                wrong = _lit("7", XSD_INT) if dt != XSD.integer else _lit("seven")
                emit("DatatypeConstraintComponent", [(f"<{p}>", wrong)])
                if dt != XSD.string and dt != RDF.JSON:
                    # ill-formed; a node of its own (rdflib recurses forever adding two ill-formed integers in a rule)
                    emit("DatatypeConstraintComponent", [(f"<{p}>", _lit("not-a-value", str(dt)))], own=True)
            kind = graph.value(ps, SH.nodeKind)
            if kind == SH.Literal:
                emit("NodeKindConstraintComponent", [(f"<{p}>", "<urn:test:an-iri>")])
            elif kind is not None:
                emit("NodeKindConstraintComponent", [(f"<{p}>", _lit("a literal"))])
            target = graph.value(ps, SH["class"])
            wrong_class = v.class_iri("Trace") if str(target) != v.class_iri("Trace") else v.class_iri("LMUsage")
            if target is not None:
                emit("ClassConstraintComponent", [(f"<{p}>", f"<urn:test:wrong-class-{n}>")])
                emit("ClassConstraintComponent", [(f"<{p}>", f"<urn:test:untyped-{n}>")])
            if graph.value(ps, SH["in"]) is not None:
                emit("InConstraintComponent", [(f"<{p}>", _lit("no-such-member"))])
            if graph.value(ps, SH.minInclusive) is not None:
                emit("MinInclusiveConstraintComponent", [(f"<{p}>", _lit("-1", XSD_INT))])
        closed = graph.value(shape, SH.closed)
        if closed is not None and closed.value:
            g, focus = node(cls)
            lines.append(f"<{focus}> <{RDF.type}> <{cls}> {g} .")
            lines.append(f"<{focus}> <urn:test:unknown-predicate> {_lit('x')} {g} .")
            expected.add((focus, "urn:test:unknown-predicate", "ClosedConstraintComponent"))
    return ("\n".join(lines) + "\n").encode("utf-8"), expected


def _unique(good: str, n: int) -> str:
    """``good`` made unique to one synthetic graph (node IRIs and plain strings), so that no rule or sh:class
    joins two graphs in pySHACL's merged graph."""
    if good.startswith("<urn:test:good-value-of-"):
        return good[:-1] + f"-{n}>"
    if good == '"x"':
        return f'"x{n}"'
    return good


def _second(good: str) -> str:
    if good.startswith('"true"'):
        return good.replace('"true"', '"false"')
    if "T10:00:00" in good:
        return good.replace("T10:00:00", "T11:00:00")
    if good.startswith('"'):
        return '"2' + good[1:] if not good.startswith('"{}"') else good.replace('"{}"', '"[]"')
    return good


def _broken_real(nquads: bytes) -> bytes:
    """The real traces with edits: required triples dropped, second values, wrong datatypes and node kinds,
    a negative position, a value outside sh:in, an unknown predicate, a reference to a node of the wrong class."""
    d = v.DSPY
    lines = nquads.decode("utf-8").splitlines()
    out = []
    done: set[str] = set()
    for line in lines:
        if f"<{d}model>" in line and "drop" not in done:
            done.add("drop")
            continue  # LMRequest.model is required
        if f"<{d}position>" in line and "neg" not in done:
            done.add("neg")
            line = line.replace(line.split(" ", 2)[2].rsplit(" ", 2)[0], _lit("-1", XSD_INT))
        elif f"<{d}part_type>" in line and "in" not in done:
            done.add("in")
            line = line.replace(line.split(" ", 2)[2].rsplit(" ", 2)[0], _lit("no-such-part"))
        elif f"<{d}role>" in line and "dup" not in done:
            done.add("dup")
            out.append(line.replace(line.split(" ", 2)[2].rsplit(" ", 2)[0], _lit("another-role")))
        elif f"<{d}lm_call_count>" in line and "dt" not in done:
            done.add("dt")
            line = line.replace(line.split(" ", 2)[2].rsplit(" ", 2)[0], _lit("3"))
        elif f"<{d}uuid>" in line and "kind" not in done:
            done.add("kind")
            line = line.replace(line.split(" ", 2)[2].rsplit(" ", 2)[0], "<urn:test:iri-not-literal>")
        elif f"<{d}request>" in line and "cls" not in done:
            done.add("cls")
            subject, _, rest = line.partition(" ")
            line = f"{subject} {rest.split(' ', 1)[0]} {subject} {rest.rsplit(' ', 2)[-2]} ."
        elif f" <{RDF.type}> <{d}LMUsage>" in line and "closed" not in done:
            done.add("closed")
            out.append(line.replace(f"<{RDF.type}> <{d}LMUsage>", f"<{d}no_such_slot> \"x\""))
        out.append(line)
    assert len(done) == 8, done
    # rules: every tool call names a tool no request offers (ToolCallOffered); one tool call is copied into the same
    # message, same call id (UniqueToolCallIds)
    label = "<http://www.w3.org/2000/01/rdf-schema#label>"
    calls = {line.split(" ", 1)[0] for line in out if f" <{RDF.type}> <{d}LMToolCallPart> " in line}
    out = [
        line.replace(line.split(" ", 2)[2].rsplit(" ", 2)[0], _lit("no_such_tool")) if line.split(" ", 1)[0] in calls and f" {label} " in line else line
        for line in out
    ]
    holder = next(line for line in out if f" <{d}parts> " in line and line.split(" ")[2] in calls)
    first = holder.split(" ")[2]
    copy = first[:-1] + '-copy>'
    out.append(holder.replace(first, copy))
    out += [copy + line[len(first):] for line in out if line.startswith(first + " ")]
    return ("\n".join(out) + "\n").encode("utf-8")


def test_broken_real_traces_agree(good_nquads, tmp_path):
    broken = _broken_real(good_nquads)
    reference = _reference(broken)
    components = {x.constraint for x in reference.violations}
    assert {
        "MinCountConstraintComponent", "MaxCountConstraintComponent", "DatatypeConstraintComponent", "NodeKindConstraintComponent",
        "InConstraintComponent", "MinInclusiveConstraintComponent", "ClosedConstraintComponent", "ClassConstraintComponent",
    } <= components
    fast = _fast(broken, tmp_path)
    _assert_same(reference, fast)
    assert all(getattr(x, "trace", "x") for x in fast.violations)  # every violation names its trace
    rules = {getattr(x, "rule", "") for x in fast.violations if x.constraint == "SPARQLConstraintComponent"}
    assert {"UniqueToolCallIds", "ToolCallOffered"} <= rules, rules


@pytest.mark.slow
def test_every_constraint_broken_once_agrees():
    broken, expected = _broken_synthetic()
    reference = _reference(broken)
    fast = _fast(broken)
    _assert_same(reference, fast)
    reported = {(x.focus_node, fastshacl_path_iri(x.path), x.constraint) for x in fast.violations}
    missing = expected - reported
    assert not missing, f"{len(missing)} deliberate breakages not reported, e.g. {sorted(missing)[:5]}"
    # values are reported where pySHACL reports one
    assert any(x.value == '"-1"^^<http://www.w3.org/2001/XMLSchema#integer>' for x in fast.violations)


def fastshacl_path_iri(path: str | None) -> str | None:
    if path is None or path.startswith("<"):
        return path and path[1:-1]
    prefix, _, local = path.partition(":")
    namespaces = dict(v.PREFIXES)
    namespaces.update({p: str(ns) for p, ns in rdflib.Graph().namespace_manager.namespaces()})
    return namespaces[prefix] + local


def test_store_traces_batches_and_progress(good_nquads, tmp_path):
    broken = _broken_real(good_nquads)
    store = EmbeddedStore(tmp_path / "store")
    store.oxigraph.load(broken, ox.RdfFormat.N_QUADS)
    names = sorted(g.value for g in store.oxigraph.named_graphs())
    done: list[int] = []
    whole = validate_store(store, workers=1)
    graphs = TraceGraphs(names=list(names), oxigraph=store.oxigraph, path=store.path)
    graphs.select(names)
    batched = fast.validate_graphs_fast(graphs, progress=done.append, batch_size=3, workers=1)
    assert sum(done) == len(names) and len(done) == -(-len(names) // 3)
    assert {_key(x) for x in whole.violations} == {_key(x) for x in batched}
    one = validate_store(store, traces=names[:1], workers=1)
    assert {getattr(x, "trace", names[0]) for x in one.violations} <= {names[0]}
    store.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_slices_and_whole_store_queries_agree(good_nquads, tmp_path, monkeypatch, workers):
    # the same broken store validated both ways, in one process and in worker processes (forced for a small store)
    monkeypatch.setattr(fast, "_PARALLEL_MIN_TRACES", 1)
    broken = _broken_real(good_nquads)
    store = EmbeddedStore(tmp_path / "store")
    store.oxigraph.load(broken, ox.RdfFormat.N_QUADS)
    store.close()
    store = EmbeddedStore(tmp_path / "store", read_only=True)  # worker processes share only a read-only store
    names = sorted(g.value for g in store.oxigraph.named_graphs())
    whole_progress: list[int] = []
    slices_progress: list[int] = []
    graphs = TraceGraphs(names=names, oxigraph=store.oxigraph, path=store.path)
    whole = fast.validate_graphs_fast(graphs, workers=workers, slices=False, progress=whole_progress.append)
    sliced = fast.validate_graphs_fast(graphs, workers=workers, slices=True, batch_size=2, progress=slices_progress.append)
    assert len(whole) > 10
    assert sorted(_key(x) + (x.message,) for x in sliced) == sorted(_key(x) + (x.message,) for x in whole)
    assert sum(whole_progress) == sum(slices_progress) == len(names)
    assert len(slices_progress) == -(-len(names) // 2)  # one call per slice
    # by default a store is sliced only above WHOLE_STORE_MAX_TRIPLES (or for chosen traces)
    default_progress: list[int] = []
    fast.validate_graphs_fast(graphs, workers=workers, batch_size=2, progress=default_progress.append)
    assert len(default_progress) > len(slices_progress)
    monkeypatch.setattr(fast, "WHOLE_STORE_MAX_TRIPLES", 10)
    default_progress.clear()
    fast.validate_graphs_fast(graphs, workers=workers, batch_size=2, progress=default_progress.append)
    assert default_progress == slices_progress
    store.close()


RULE = """
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix dspy: <https://w3id.org/lmodel/dspy/> .
@prefix ex: <urn:test:rules#> .
ex:prefixes sh:declare [ sh:prefix "dspy" ; sh:namespace "https://w3id.org/lmodel/dspy/"^^<http://www.w3.org/2001/XMLSchema#anyURI> ] .
ex:UsageTotals a sh:NodeShape ;
    sh:targetClass dspy:LMUsage ;
    sh:sparql [
        sh:prefixes ex:prefixes ;
        sh:message "total_tokens {?value} is less than prompt_tokens" ;
        sh:select \"\"\"
            SELECT $this ?value WHERE {
                $this a dspy:LMUsage ; dspy:total_tokens ?value ; dspy:prompt_tokens ?prompt .
                FILTER(?value < ?prompt)
            }\"\"\" ;
    ] .
"""


def test_sparql_constraints_agree(good_nquads, tmp_path):
    """A hand-written sh:sparql constraint (written to run with $this unbound), broken once, in both engines."""
    import shutil

    import pyshacl

    directory = tmp_path / "shapes"
    shutil.copytree(shapes_dir(), directory)
    (directory / "zz.rules.ttl").write_text(RULE, encoding="utf-8")
    d = v.DSPY
    lines = good_nquads.decode("utf-8").splitlines()
    usage = next(line.split(" ")[0] for line in lines if f"<{RDF.type}> <{d}LMUsage>" in line)
    graph_name = next(line.rsplit(" ", 2)[-2] for line in lines if line.startswith(usage + " "))
    lines = [x for x in lines if not (x.startswith(usage + " ") and (f"<{d}total_tokens>" in x or f"<{d}prompt_tokens>" in x))]
    lines += [f"{usage} <{d}total_tokens> {_lit('1', XSD_INT)} {graph_name} .", f"{usage} <{d}prompt_tokens> {_lit('5', XSD_INT)} {graph_name} ."]
    lines = [x for x in lines if x.rsplit(" ", 2)[-2] == graph_name]  # one trace: pySHACL merges graphs, rules must not join two
    data = ("\n".join(lines) + "\n").encode("utf-8")
    fast = validate_dataset(_dataset(data), shapes=directory)
    assert fastshacl.compile_shapes(directory).unsupported == ()
    shapes_graph = rdflib.Graph()
    for path in sorted(directory.glob("*.ttl")):
        if path.name != CLASSES_FILE:
            shapes_graph.parse(path, format="turtle")
    classes = rdflib.Graph().parse(directory / CLASSES_FILE, format="nt")
    conforms, report, _ = pyshacl.validate(graph_from_ntriples(data), shacl_graph=shapes_graph, ont_graph=classes, inference="none", advanced=True)
    ref = {
        (str(report.value(r, SH.focusNode)), str(report.value(r, SH.sourceConstraintComponent)).rsplit("#", 1)[-1])
        for r in report.subjects(RDF.type, SH.ValidationResult)
    }
    got = {(x.focus_node, x.constraint) for x in fast.violations}
    assert ref == got == {(usage[1:-1], "SPARQLConstraintComponent")}
    [violation] = [x for x in fast.violations if getattr(x, "rule", "UsageTotals") == "UsageTotals"]
    assert violation.value == _lit("1", XSD_INT) and "total_tokens 1 is less" in violation.message


def test_every_hand_written_rule_is_broken_somewhere(good_nquads):
    """Each sh:sparql rule of the shapes directory is reported at least once on the broken data (both engines agree
    on that data in the tests above)."""
    compiled = fastshacl.compile_shapes()
    rules = {rule_name(c.shape) for c in compiled.checks if c.kind == "sparql"}
    reported = set()
    for data in (_broken_real(good_nquads), _broken_synthetic()[0]):
        reported |= {getattr(x, "rule", "") for x in validate_dataset(_dataset(data)).violations if x.constraint == "SPARQLConstraintComponent"}
    assert rules <= reported, f"rules never broken: {sorted(rules - reported)}"

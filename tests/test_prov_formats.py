"""PROV-JSON, PROV-N and PROV-XML (`dspy-rdf prov --format provjson|provn|provxml`) on captured DSPy runs: the prov
package reads each file back into the same document, which its own PROV-O writer turns back into the view the file
came from (so every IRI, time and relation survives); PROV-N holds one statement per record of the view; PROV-XML is
valid against the W3C PROV-XML schema, which the prov package ships (prov/tests/schemas/, with xml.xsd: no network)."""

from __future__ import annotations

import datetime
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import dspy
import prov
import prov.model as pm
import pyoxigraph as ox
import pytest
from conftest import DATA, examples
from hypothesis import given, settings
from hypothesis import strategies as st
from lms import ScriptedLM
from lxml import etree
from traced_programs import QUESTION_REACT, REACT, add, divide

from dspy_rdf.canonical import model as m
from dspy_rdf.capture.recorder import MemorySink, TraceRecorder
from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.interop.prov import PROV, prov_graph_name, prov_view
from dspy_rdf.interop.prov_documents import MISSING_PROV, from_xml_names, prov_document, to_xml_names
from dspy_rdf.sources.tracejson import trace_from_json
from dspy_rdf.store import EmbeddedStore

PROV_XSD = Path(str(files("prov"))) / "tests" / "schemas" / "prov.xsd"
"""The W3C PROV-XML schema (https://www.w3.org/ns/prov.xsd and what it includes and imports), as the prov wheel ships
it for its own tests."""
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"
SUFFIXES = {"provjson": ".json", "provn": ".provn", "provxml": ".provx"}
READERS = {"provjson": "json", "provn": "provn", "provxml": "xml"}
XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9._-]*")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> str:
    """A closed store of real DSPy runs: the cross-path capture (program runs with tools, models and the program as
    agents), exported with `dspy-rdf export`, the bundled demo traces and lm.history dumps (history entries, and traces
    whose view is empty)."""
    path = tmp_path_factory.mktemp("prov-formats") / "store"
    assert main(["export", str(DATA / "crosspath" / "capture.jsonl"), "--store", str(path)]) == 0
    traces = [item.trace for item in read_traces(bundled_traces_path())]
    traces += [trace_from_json(json.loads((DATA / name).read_text())) for name in ("history_dicts_dspy3.3.1.json", "react_history.json")]
    traces.append(run_in_a_session())
    with EmbeddedStore(path) as store:
        store.put(traces)
    return str(path)


def run_in_a_session() -> m.Trace:
    """A dspy.ReAct run recorded live for a user in a session (the user an agent, the session an entity of the view),
    both ids with characters an XML name cannot hold."""
    sink = MemorySink()
    with dspy.context(lm=ScriptedLM(REACT), callbacks=[TraceRecorder(sink, session_id="conversation 7/ü", user_id="alice@example.org")]):
        dspy.ReAct("question -> answer", tools=[add, divide])(question=QUESTION_REACT)
    [trace] = sink.traces
    return trace


@pytest.fixture(scope="module")
def views(store_path) -> list[tuple[str, list[ox.Triple]]]:
    """The PROV-O view of each trace of the store."""
    with EmbeddedStore(store_path, read_only=True) as store:
        found = list(prov_view(store))
    assert len(found) >= 10 and any(not triples for _, triples in found)
    predicates = {t.predicate.value for _, triples in found for t in triples}
    assert {PROV + p for p in ("used", "wasGeneratedBy", "wasInformedBy", "wasAssociatedWith", "startedAtTime")} <= predicates
    return found


@pytest.fixture(scope="module")
def written(store_path, tmp_path_factory) -> dict[str, Path]:
    """Each format, as the command line writes it (chosen by the output's extension)."""
    folder = tmp_path_factory.mktemp("prov-formats-out")
    out = {}
    for fmt, suffix in SUFFIXES.items():
        out[fmt] = folder / f"view{suffix}"
        assert main(["prov", "--store", store_path, "-o", str(out[fmt])]) == 0
    return out


def read_back(fmt: str, path: Path) -> pm.ProvDocument:
    """What the prov package reads from a file (PROV-XML names made IRIs' local parts again)."""
    document = pm.ProvDocument.deserialize(source=str(path), format=READERS[fmt])
    return from_xml_names(document) if fmt == "provxml" else document


# PROV-O as comparable sets --------------------------------------------------------------------------------------

IMPLIED = {  # a qualified node stands for the unqualified triple: qualifying property -> (that property, object property)
    "qualifiedAssociation": ("wasAssociatedWith", "agent"), "qualifiedUsage": ("used", "entity"),
    "qualifiedGeneration": ("wasGeneratedBy", "activity"), "qualifiedDerivation": ("wasDerivedFrom", "entity"),
    "qualifiedDelegation": ("actedOnBehalfOf", "agent"), "qualifiedCommunication": ("wasInformedBy", "activity"),
    "qualifiedAttribution": ("wasAttributedTo", "agent"),
}  # fmt: skip


SUPERCLASSES = {"SoftwareAgent": "Agent", "Person": "Agent", "Organization": "Agent", "Plan": "Entity", "Collection": "Entity"}


def normalized(triples: set[ox.Triple]) -> set[str]:
    """The triples as PROV-O means them: date-times by value, each qualified node's unqualified triple and each node's
    PROV superclass added, and without prov:Role nodes (a role is a value in PROV-DM: its IRI is kept, its class and
    label have no place)."""
    roles = {t.subject for t in triples if t.predicate.value == RDF_TYPE and t.object.value == PROV + "Role"}
    out = set()
    for t in triples:
        if t.subject in roles:
            continue
        obj = t.object
        if isinstance(obj, ox.Literal) and obj.datatype.value == XSD_DATETIME:
            obj = ox.Literal(datetime.datetime.fromisoformat(obj.value).isoformat(), datatype=obj.datatype)
        out.add(str(ox.Triple(t.subject, t.predicate, obj)))
        if t.predicate.value == RDF_TYPE and obj.value.removeprefix(PROV) in SUPERCLASSES:
            out.add(str(ox.Triple(t.subject, t.predicate, ox.NamedNode(PROV + SUPERCLASSES[obj.value.removeprefix(PROV)]))))
        local = t.predicate.value.removeprefix(PROV)
        if local in IMPLIED:
            relation, object_property = IMPLIED[local]
            for detail in triples:
                if detail.subject == t.object and detail.predicate.value == PROV + object_property:
                    out.add(str(ox.Triple(t.subject, ox.NamedNode(PROV + relation), detail.object)))
    return out


def prov_o(document: pm.ProvDocument) -> dict[str, set[ox.Triple]]:
    """The prov package's own PROV-O of a document, graph by graph (a bundle's graph is named by its IRI)."""
    text = document.serialize(format="rdf", rdf_format="nquads")
    graphs: dict[str, set[ox.Triple]] = {}
    for quad in ox.parse(text.encode(), format=ox.RdfFormat.N_QUADS):
        assert isinstance(quad.graph_name, ox.NamedNode), f"a record outside the bundles: {quad}"
        graphs.setdefault(quad.graph_name.value, set()).add(ox.Triple(quad.subject, quad.predicate, quad.object))
    return graphs


# Tests ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(SUFFIXES))
def test_each_file_reads_back_as_the_view_and_its_prov_o_is_the_view(fmt, written, views):
    """The prov package reads the file back into the document of the view, one bundle per trace named as its view's
    graph, whose PROV-O (written by the prov package) is the view, IRI for IRI and time for time."""
    document = read_back(fmt, written[fmt])
    assert document == prov_document(views)
    assert {b.identifier.uri for b in document.bundles} == {prov_graph_name(iri) for iri, _ in views}
    assert len(document.bundles) == len(views) and not document.get_records()
    graphs = prov_o(document)
    for iri, triples in views:
        assert normalized(graphs.get(prov_graph_name(iri), set())) == normalized(set(triples)), iri
    assert sum(len(triples) for _, triples in views) > 300


def test_the_extension_chooses_the_format_as_format_does_and_the_output_is_the_same_each_time(written, store_path, tmp_path, capsys):
    for fmt, path in written.items():
        again = tmp_path / f"{fmt}.out"
        assert main(["prov", "--store", store_path, "--format", fmt, "-o", str(again)]) == 0
        assert again.read_bytes() == path.read_bytes(), fmt
    assert "as PROV-N to" in capsys.readouterr().err
    as_xml = tmp_path / "view.xml"
    assert main(["prov", "--store", store_path, "-o", str(as_xml)]) == 0
    assert as_xml.read_bytes() == written["provxml"].read_bytes()
    # N-Quads and TriG are chosen as before
    for suffix, rdf_format in ((".nq", ox.RdfFormat.N_QUADS), (".trig", ox.RdfFormat.TRIG)):
        path = tmp_path / f"view{suffix}"
        assert main(["prov", "--store", store_path, "-o", str(path)]) == 0
        assert all(q.graph_name.value.endswith("/prov") for q in ox.parse(path.read_bytes(), format=rdf_format))


def _statements(provn: str) -> dict[str, Counter[str]]:
    """PROV-N statements by bundle: the bundle's identifier -> how many statements of each kind, and ``kind;`` for
    those with an identifier."""
    bundles = re.findall(r"^\s*bundle (\S+)\n(.*?)^\s*endBundle", provn, flags=re.MULTILINE | re.DOTALL)
    counts = {}
    for name, body in bundles:
        found = re.findall(r"^\s*(\w+)\(([^;,)]*;)?", body, flags=re.MULTILINE)
        counts[name] = Counter(kind + (";" if identified else "") for kind, identified in found)
    return counts


def _typed(triples: list[ox.Triple]) -> Callable[..., int]:
    """How many nodes of the triples have one of some PROV classes."""

    def subjects(*classes: str) -> int:
        wanted = {PROV + c for c in classes}
        return len({t.subject for t in triples if t.predicate.value == RDF_TYPE and t.object.value in wanted})

    return subjects


def test_provn_has_a_statement_for_each_record_of_the_view(written, views):
    """Counted in the PROV-N text against the view's triples (not read back by prov)."""
    provn = written["provn"].read_text(encoding="utf-8")
    counts = _statements(provn)
    assert len(counts) == len(views)
    prefixes = dict(re.findall(r"^\s*prefix (\S+) <([^>]+)>", provn, flags=re.MULTILINE))
    names = {prefixes[name.split(":", 1)[0]] + name.split(":", 1)[1]: c for name, c in counts.items()}
    handled = {RDF_TYPE, "http://www.w3.org/2000/01/rdf-schema#label"} | {PROV + p for p in (
        "startedAtTime", "endedAtTime", "used", "wasGeneratedBy", "wasInformedBy", "wasDerivedFrom", "wasAssociatedWith",
        "actedOnBehalfOf", "qualifiedAssociation", "agent", "hadRole", "qualifiedDelegation", "hadActivity")}  # fmt: skip
    handled.add("http://purl.org/dc/terms/isPartOf")  # a session: an attribute of the activity, not a statement
    for iri, triples in views:
        assert {t.predicate.value for t in triples} <= handled, "a PROV term this test does not count yet"
        subjects = _typed(triples)
        count = Counter(t.predicate.value.removeprefix(PROV) for t in triples)
        qualified = {(t.subject, d.object) for t in triples if t.predicate.value == PROV + "qualifiedAssociation"
                     for d in triples if d.subject == t.object and d.predicate.value == PROV + "agent"}  # fmt: skip
        unqualified = {(t.subject, t.object) for t in triples if t.predicate.value == PROV + "wasAssociatedWith"}
        delegated = {(t.subject, d.object) for t in triples if t.predicate.value == PROV + "qualifiedDelegation"
                     for d in triples if d.subject == t.object and d.predicate.value == PROV + "agent"}  # fmt: skip
        behalf = {(t.subject, t.object) for t in triples if t.predicate.value == PROV + "actedOnBehalfOf"}
        expected = Counter({
            "activity": subjects("Activity"), "entity": subjects("Entity"), "agent": subjects("Agent", "SoftwareAgent"),
            **{kind: count[kind] for kind in ("used", "wasGeneratedBy", "wasInformedBy", "wasDerivedFrom")},
            "wasAssociatedWith;": len(qualified), "wasAssociatedWith": len(unqualified - qualified),
            "actedOnBehalfOf;": len(delegated), "actedOnBehalfOf": len(behalf - delegated),
        })  # fmt: skip
        assert names[prov_graph_name(iri)] == +expected, iri
    assert provn.count("[prov:role='role:") == sum(1 for _, ts in views for t in ts if t.predicate.value == PROV + "hadRole")


@pytest.fixture(scope="module")
def prov_xsd() -> etree.XMLSchema:
    assert PROV_XSD.is_file(), (
        f"the prov package {prov.__version__} has no {PROV_XSD}: the W3C PROV-XML schema this test validates against "
        "came with it (prov/tests/schemas/ in the wheel, from 3.2.3 on)"
    )
    return etree.XMLSchema(etree.parse(str(PROV_XSD)))


def test_provxml_is_valid_against_the_w3c_prov_xml_schema(written, prov_xsd):
    tree = etree.parse(str(written["provxml"]))
    assert prov_xsd.validate(tree), prov_xsd.error_log
    ids = tree.xpath("//@prov:id", namespaces={"prov": PROV})
    assert len(ids) > 100 and any("_x002F_" in value for value in ids)


def test_without_xml_names_the_prov_package_writes_identifiers_the_schema_refuses(views, prov_xsd):
    """Why PROV-XML escapes local parts: prov writes the IRIs' local parts (``call/0``) as they are."""
    tree = etree.fromstring(prov_document(views).serialize(format="xml").encode())
    assert not prov_xsd.validate(tree)
    assert "QName" in str(prov_xsd.error_log.last_error)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(st.sampled_from("azAZ09xX_-./:#?=&~@!$'()*+,;[]é🙂"), min_size=1, max_size=24))  # what PROV-N can write
def test_xml_names_are_xml_names_and_give_back_the_local_part(local):
    document = pm.ProvDocument()
    document.entity(document.add_namespace("ex", "urn:example:")[local])
    xml = to_xml_names(document)
    [record] = xml.get_records()
    assert record.identifier is not None and XML_NAME.fullmatch(record.identifier.localpart)
    assert from_xml_names(xml) == document


@pytest.mark.parametrize(
    ("local", "escaped"),
    [("call/0", "call_x002F_0"), ("openai%2Fgpt-4o", "openai_x0025_2Fgpt-4o"), ("0", "_x0030_"), ("prov", "prov"),
     ("_x0041_", "_x005F_x0041_"), ("a_b", "a_b"), ("é", "_x00E9_"), ("🙂", "_x0001F642_")],
)  # fmt: skip
def test_xml_names(local, escaped):
    document = pm.ProvDocument()
    document.entity(document.add_namespace("ex", "urn:example:")[local])
    [record] = to_xml_names(document).get_records()
    assert record.identifier is not None and record.identifier.localpart == escaped


def test_prov_o_terms_the_view_does_not_use_yet_are_records_too(views):
    """Qualified usages with a time and a role, attributions, revisions, plans, generation times: each becomes the
    PROV-DM record PROV-O describes, and the prov package writes the same PROV-O back."""
    iri, triples = next((iri, ts) for iri, ts in views if any(t.predicate.value == PROV + "wasAssociatedWith" for t in ts))
    activity, agent = next((t.subject, t.object) for t in triples if t.predicate.value == PROV + "wasAssociatedWith")
    entity = next(t.subject for t in triples if t.predicate.value == RDF_TYPE and t.object.value == PROV + "Entity")
    usage, plan, role = ox.NamedNode(f"{iri}/usage/1"), ox.NamedNode(f"{iri}/plan"), ox.NamedNode("urn:dspy-rdf:role:input")
    association = ox.NamedNode(f"{iri}/association/planned")
    time = ox.Literal("2026-01-02T03:04:05+00:00", datatype=ox.NamedNode(XSD_DATETIME))
    p, a = (lambda name: ox.NamedNode(PROV + name)), ox.NamedNode(RDF_TYPE)
    extra = [
        ox.Triple(activity, p("qualifiedUsage"), usage), ox.Triple(usage, a, p("Usage")), ox.Triple(usage, p("entity"), entity),
        ox.Triple(usage, p("atTime"), time), ox.Triple(usage, p("hadRole"), role), ox.Triple(activity, p("used"), entity),
        ox.Triple(entity, p("wasAttributedTo"), agent), ox.Triple(entity, p("generatedAtTime"), time),
        ox.Triple(plan, a, p("Plan")), ox.Triple(plan, a, p("Entity")), ox.Triple(entity, p("wasRevisionOf"), plan),
        ox.Triple(activity, p("qualifiedAssociation"), association), ox.Triple(association, a, p("Association")),
        ox.Triple(association, p("agent"), agent), ox.Triple(association, p("hadPlan"), plan),
    ]  # fmt: skip
    document = prov_document([(iri, triples + extra)])
    [bundle] = document.bundles
    records = {(r.get_type().localpart, r.identifier.uri if r.identifier else None): r for r in bundle.get_records()}
    used = records[("Usage", usage.value)]
    usages = [r for r in bundle.get_records(pm.ProvUsage) if dict(r.formal_attributes)[pm.PROV_ATTR_ENTITY].uri == entity.value]
    assert usages == [used]  # the qualified usage stands for the unqualified triple
    assert dict(used.formal_attributes)[pm.PROV_ATTR_TIME] == datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    assert [v.uri for k, v in used.extra_attributes if k == pm.PROV_ROLE] == [role.value]
    assert dict(records[("Association", association.value)].formal_attributes)[pm.PROV_ATTR_PLAN].uri == plan.value
    revision = [r for r in bundle.get_records(pm.ProvDerivation) if (pm.PROV_TYPE, pm.PROV["Revision"]) in r.extra_attributes]
    assert [dict(r.formal_attributes)[pm.PROV_ATTR_USED_ENTITY].uri for r in revision] == [plan.value]
    assert any(r.get_type() == pm.PROV_ATTRIBUTION for r in bundle.get_records())
    assert (pm.PROV_TYPE, pm.PROV["Plan"]) in records[("Entity", plan.value)].extra_attributes
    # read back from PROV-JSON, the same document
    assert pm.ProvDocument.deserialize(content=document.serialize(format="json"), format="json") == document


@pytest.mark.parametrize(
    ("triple", "message"),
    [
        (lambda s, o: ox.Triple(s, ox.NamedNode(PROV + "generated"), o), "prov:generated has no PROV-DM form"),
        (lambda s, o: ox.Triple(ox.NamedNode("urn:example:thing"), ox.NamedNode(PROV + "value"), ox.Literal("1")), "is not a PROV entity, activity or agent"),
        (lambda s, o: ox.Triple(s, ox.NamedNode(PROV + "startedAtTime"), ox.Literal("2026-01-01T00:00:00Z", datatype=ox.NamedNode(XSD_DATETIME))), "two start or two end times"),
        (lambda s, o: ox.Triple(s, ox.NamedNode(PROV + "endedAtTime"), ox.Literal("yesterday")), 'the time "yesterday" is not an xsd:dateTime'),
    ],
)  # fmt: skip
def test_a_triple_with_no_prov_dm_form_is_an_error_naming_it(views, triple, message):
    iri, triples = next((iri, ts) for iri, ts in views if any(t.predicate.value == PROV + "startedAtTime" for t in ts))
    activity = next(t.subject for t in triples if t.predicate.value == PROV + "startedAtTime")
    entity = next(t.subject for t in triples if t.predicate.value == RDF_TYPE and t.object.value == PROV + "Entity")
    with pytest.raises(ValueError, match=re.escape(message)):
        prov_document([(iri, [*triples, triple(activity, entity)])])


def test_without_the_prov_package_the_command_says_what_to_install(store_path, tmp_path, capsys, monkeypatch):
    for name in ("prov", "prov.model", "prov.identifier"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "dspy_rdf.interop.prov_documents", raising=False)  # imported again, without prov
    out = tmp_path / "view.json"
    assert main(["prov", "--store", store_path, "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {MISSING_PROV}"
    assert not out.exists()
    assert main(["prov", "--store", store_path, "-o", str(tmp_path / "view.nq")]) == 0  # N-Quads need no prov


def test_without_lxml_provxml_says_what_to_install_and_the_other_formats_are_written(store_path, tmp_path, capsys, monkeypatch):
    for name in ("lxml", "lxml.etree"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "prov.serializers.provxml", raising=False)  # imported again, without lxml
    out = tmp_path / "view.provx"
    assert main(["prov", "--store", store_path, "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {MISSING_PROV}"
    assert not out.exists()
    assert main(["prov", "--store", store_path, "-o", str(tmp_path / "view.json")]) == 0

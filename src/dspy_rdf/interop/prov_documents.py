r"""The PROV-O view as PROV documents: PROV-JSON, PROV-N and PROV-XML, written by the ``prov`` package.

:func:`prov_document` turns the views :func:`~dspy_rdf.interop.prov.prov_view` gives into one
:class:`prov.model.ProvDocument` with one bundle per trace, named as the view's graph (``<trace IRI>/prov``).
The conversion follows the PROV-O mapping of PROV-DM and knows every PROV-O term, not only those the view uses today:

- nodes typed ``prov:Activity``, ``prov:Entity`` (or a subclass: ``prov:Plan``, ``prov:Collection``, …) and
  ``prov:Agent`` (or ``prov:SoftwareAgent``, ``prov:Person``, ``prov:Organization``) are activity, entity and agent
  records; their other classes are ``prov:type`` values, ``rdfs:label`` is ``prov:label``, ``prov:startedAtTime`` /
  ``prov:endedAtTime`` the activity's times;
- each PROV-O relation (``prov:used``, ``prov:wasGeneratedBy``, ``prov:wasDerivedFrom``, ``prov:actedOnBehalfOf``, …)
  is the PROV-DM relation record; a qualified one (``prov:qualifiedAssociation`` and the like) is that record with
  the qualified node's IRI as its identifier and its details (``prov:hadRole`` as ``prov:role``, ``prov:hadPlan``,
  ``prov:atTime``, …), and stands for the unqualified triple it qualifies;
- a ``prov:Role`` or ``prov:Location`` is a value in PROV-DM, not a record: its IRI is the ``prov:role`` (or
  ``prov:location``) of the records that name it, and its ``rdfs:label`` has no place in the document.

A triple that has no PROV-DM form is an error naming it rather than left out.

Identifiers are qualified names whose expansion (namespace IRI + local part) is the view's IRI: a trace's nodes are
under the namespace ``<trace IRI>/`` (prefixed with the trace's last segment, e.g. ``run-…:call/0``), the models,
programs, tools and roles under ``urn:dspy-rdf:model:`` (``model:``) and the like, the dspy vocabulary under
``dspy:``. PROV-JSON and PROV-N hold those names as they are. PROV-XML cannot: its identifiers are ``xsd:QName``\ s,
whose local part must be an XML name (no ``/``, no ``%``, not starting with a digit), so there a local part that is
not one is written with ``_xHHHH_`` escapes (``call_x002F_0``: the escapes of SQL/XML and .NET's ``XmlConvert``,
which the prov package uses for attribute names too); :func:`from_xml_names` reads them back.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pyoxigraph as ox

from dspy_rdf.interop.prov import PROV, prov_graph_name, prov_view
from dspy_rdf.store.base import TraceStore

MISSING_PROV = "PROV-JSON, PROV-N and PROV-XML are written by the prov package: pip install 'dspy-rdf[prov]'"
"""What to say when the ``prov`` package (or, for PROV-XML, lxml) is not installed."""

try:
    import prov.model as pm
    from prov.identifier import Namespace, QualifiedName
except ImportError as exc:  # pragma: no cover - exercised only without the prov extra
    raise ImportError(MISSING_PROV) from exc

__all__ = [
    "DSPY", "FORMATS", "MISSING_PROV", "check_xml_support", "from_xml_names", "prov_document", "to_xml_names", "write_prov_document",
]

DSPY = "https://w3id.org/lmodel/dspy/"
FORMATS = {"provjson": "json", "provn": "provn", "provxml": "xml"}
"""Our format names -> the ``prov`` package's."""

_RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
_RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
_XSD = "http://www.w3.org/2001/XMLSchema#"

_P = pm.PROV  # the prov namespace as the prov package names it


@dataclass(frozen=True)
class _Relation:
    """A PROV-DM relation as PROV-O writes it: its record type, the formal attributes its subject and object fill,
    and the ``prov:type`` a subproperty adds (``prov:wasRevisionOf`` is a derivation of type ``prov:Revision``)."""

    record: QualifiedName
    subject: QualifiedName
    object: QualifiedName
    kind: QualifiedName | None = None


_RELATIONS: dict[str, _Relation] = {
    "used": _Relation(pm.PROV_USAGE, pm.PROV_ATTR_ACTIVITY, pm.PROV_ATTR_ENTITY),
    "wasGeneratedBy": _Relation(pm.PROV_GENERATION, pm.PROV_ATTR_ENTITY, pm.PROV_ATTR_ACTIVITY),
    "wasInvalidatedBy": _Relation(pm.PROV_INVALIDATION, pm.PROV_ATTR_ENTITY, pm.PROV_ATTR_ACTIVITY),
    "wasStartedBy": _Relation(pm.PROV_START, pm.PROV_ATTR_ACTIVITY, pm.PROV_ATTR_TRIGGER),
    "wasEndedBy": _Relation(pm.PROV_END, pm.PROV_ATTR_ACTIVITY, pm.PROV_ATTR_TRIGGER),
    "wasInformedBy": _Relation(pm.PROV_COMMUNICATION, pm.PROV_ATTR_INFORMED, pm.PROV_ATTR_INFORMANT),
    "wasAssociatedWith": _Relation(pm.PROV_ASSOCIATION, pm.PROV_ATTR_ACTIVITY, pm.PROV_ATTR_AGENT),
    "wasAttributedTo": _Relation(pm.PROV_ATTRIBUTION, pm.PROV_ATTR_ENTITY, pm.PROV_ATTR_AGENT),
    "actedOnBehalfOf": _Relation(pm.PROV_DELEGATION, pm.PROV_ATTR_DELEGATE, pm.PROV_ATTR_RESPONSIBLE),
    "wasDerivedFrom": _Relation(pm.PROV_DERIVATION, pm.PROV_ATTR_GENERATED_ENTITY, pm.PROV_ATTR_USED_ENTITY),
    "wasRevisionOf": _Relation(pm.PROV_DERIVATION, pm.PROV_ATTR_GENERATED_ENTITY, pm.PROV_ATTR_USED_ENTITY, _P["Revision"]),
    "wasQuotedFrom": _Relation(pm.PROV_DERIVATION, pm.PROV_ATTR_GENERATED_ENTITY, pm.PROV_ATTR_USED_ENTITY, _P["Quotation"]),
    "hadPrimarySource": _Relation(pm.PROV_DERIVATION, pm.PROV_ATTR_GENERATED_ENTITY, pm.PROV_ATTR_USED_ENTITY, _P["PrimarySource"]),
    "wasInfluencedBy": _Relation(pm.PROV_INFLUENCE, pm.PROV_ATTR_INFLUENCEE, pm.PROV_ATTR_INFLUENCER),
    "specializationOf": _Relation(pm.PROV_SPECIALIZATION, pm.PROV_ATTR_SPECIFIC_ENTITY, pm.PROV_ATTR_GENERAL_ENTITY),
    "alternateOf": _Relation(pm.PROV_ALTERNATE, pm.PROV_ATTR_ALTERNATE1, pm.PROV_ATTR_ALTERNATE2),
    "hadMember": _Relation(pm.PROV_MEMBERSHIP, pm.PROV_ATTR_COLLECTION, pm.PROV_ATTR_ENTITY),
}
"""PROV-O's unqualified relations (the starting-point and expanded terms)."""

_QUALIFIED: dict[str, tuple[str, str]] = {
    "qualifiedUsage": ("used", "entity"),
    "qualifiedGeneration": ("wasGeneratedBy", "activity"),
    "qualifiedInvalidation": ("wasInvalidatedBy", "activity"),
    "qualifiedStart": ("wasStartedBy", "entity"),
    "qualifiedEnd": ("wasEndedBy", "entity"),
    "qualifiedCommunication": ("wasInformedBy", "activity"),
    "qualifiedAssociation": ("wasAssociatedWith", "agent"),
    "qualifiedAttribution": ("wasAttributedTo", "agent"),
    "qualifiedDelegation": ("actedOnBehalfOf", "agent"),
    "qualifiedDerivation": ("wasDerivedFrom", "entity"),
    "qualifiedRevision": ("wasRevisionOf", "entity"),
    "qualifiedQuotation": ("wasQuotedFrom", "entity"),
    "qualifiedPrimarySource": ("hadPrimarySource", "entity"),
    "qualifiedInfluence": ("wasInfluencedBy", "influencer"),
}
"""A qualifying property -> the relation it qualifies and the property of the qualified node that names the object."""

_QUALIFIED_CLASSES = {"Influence", "EntityInfluence", "ActivityInfluence", "AgentInfluence", "InstantaneousEvent",
                      "Usage", "Generation", "Invalidation", "Start", "End", "Communication", "Association",
                      "Attribution", "Delegation", "Derivation", "Revision", "Quotation", "PrimarySource"}  # fmt: skip
"""The classes of qualified nodes (their record type says what they are)."""

_DETAILS: dict[str, dict[QualifiedName, QualifiedName]] = {
    "atTime": {record: pm.PROV_ATTR_TIME for record in (pm.PROV_USAGE, pm.PROV_GENERATION, pm.PROV_INVALIDATION, pm.PROV_START, pm.PROV_END)},
    "hadPlan": {pm.PROV_ASSOCIATION: pm.PROV_ATTR_PLAN},
    "hadActivity": {pm.PROV_DERIVATION: pm.PROV_ATTR_ACTIVITY, pm.PROV_DELEGATION: pm.PROV_ATTR_ACTIVITY,
                    pm.PROV_START: pm.PROV_ATTR_STARTER, pm.PROV_END: pm.PROV_ATTR_ENDER},
    "hadGeneration": {pm.PROV_DERIVATION: pm.PROV_ATTR_GENERATION},
    "hadUsage": {pm.PROV_DERIVATION: pm.PROV_ATTR_USAGE},
}  # fmt: skip
"""Properties of a qualified node that are formal attributes of its record, by record type."""

_ATTRIBUTES = {"hadRole": pm.PROV_ROLE, "atLocation": pm.PROV_LOCATION, "value": pm.PROV_VALUE}
"""PROV-O properties that are PROV-DM attributes (on elements and qualified relations alike)."""

_ELEMENT_CLASSES: dict[str, QualifiedName] = {
    "Entity": pm.PROV_ENTITY, "Plan": pm.PROV_ENTITY, "Collection": pm.PROV_ENTITY, "EmptyCollection": pm.PROV_ENTITY,
    "Bundle": pm.PROV_ENTITY, "Activity": pm.PROV_ACTIVITY,
    "Agent": pm.PROV_AGENT, "SoftwareAgent": pm.PROV_AGENT, "Person": pm.PROV_AGENT, "Organization": pm.PROV_AGENT,
}  # fmt: skip
"""PROV-O classes of elements -> the record type (a subclass is also a ``prov:type`` of the record)."""

_VALUE_CLASSES = {"Role", "Location"}
"""PROV-O classes whose nodes are attribute values in PROV-DM."""


def _natural(text: str) -> tuple[Any, ...]:
    """A sort key putting ``call/2`` before ``call/10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _term_key(term: Any) -> tuple[Any, ...]:
    return (_natural(term.value), str(term))


_PREFIXES = {DSPY: "dspy", "urn:dspy-rdf:model:": "model", "urn:dspy-rdf:program:": "program", "urn:dspy-rdf:tool:": "tool",
             "urn:dspy-rdf:role:": "role"}  # fmt: skip
"""The prefixes of the namespaces the view uses besides its traces' (others get one made from their IRI)."""


class _Names:
    """Qualified names for IRIs, declaring their namespaces in the document: the longest namespace already declared
    that the IRI extends at a ``/``, ``#`` or ``:``, else a new one ending at the IRI's last such separator."""

    _SEPARATORS = "/#:"

    def __init__(self, document: pm.ProvDocument) -> None:
        self.document = document
        self.namespaces: dict[str, Namespace] = {}
        self.prefixes = {"prov", "xsd", "xsi", "xml"}
        self.cache: dict[str, QualifiedName] = {}
        for namespace in (pm.PROV, pm.XSD):
            self.namespaces[namespace.uri] = namespace

    def declare(self, uri: str, hint: str) -> Namespace:
        """The namespace ``uri``, declared with a prefix made from ``hint`` if it is not yet."""
        if uri in self.namespaces:
            return self.namespaces[uri]
        words = re.findall(r"[A-Za-z][A-Za-z0-9_-]*", _PREFIXES.get(uri, hint))
        base = words[-1] if words and not words[-1].lower().startswith("xml") else "ns"
        base = base.rstrip("-") or "ns"
        prefix, n = base, 1
        while prefix in self.prefixes:
            n += 1
            prefix = f"{base}{n}"
        self.prefixes.add(prefix)
        namespace = self.document.add_namespace(prefix, uri)
        self.namespaces[uri] = namespace
        return namespace

    def declare_trace(self, trace_iri: str) -> None:
        """The namespace of a trace's nodes, ``<trace IRI>/``, prefixed with the trace IRI's last segment."""
        self.declare(trace_iri + "/", trace_iri)

    def __call__(self, iri: str) -> QualifiedName:
        name = self.cache.get(iri)
        if name is not None:
            return name
        cuts = [i + 1 for i, char in enumerate(iri[:-1]) if char in self._SEPARATORS]
        if not cuts:
            raise ValueError(f"<{iri}> has no '/', '#' or ':' to split it into a namespace and a local name")
        namespace = next((self.namespaces[iri[:cut]] for cut in reversed(cuts) if iri[:cut] in self.namespaces), None)
        if namespace is None:
            namespace = self.declare(iri[: cuts[-1]], iri[: cuts[-1]])
        name = namespace[iri[len(namespace.uri) :]]
        self.cache[iri] = name
        return name


@dataclass
class _Node:
    """What the view says of one node that is not a relation: its classes and its other properties."""

    classes: list[str] = field(default_factory=list)
    properties: list[tuple[str, Any]] = field(default_factory=list)


def _local(iri: str) -> str | None:
    """The PROV-O local name of a term in the prov namespace, else ``None``."""
    return iri[len(PROV) :] if iri.startswith(PROV) else None


class _Bundle:
    """One trace's view as records of a bundle."""

    def __init__(self, bundle: pm.ProvBundle, names: _Names) -> None:
        self.bundle = bundle
        self.names = names

    def name(self, term: Any) -> QualifiedName | None:
        """The identifier of an IRI (a blank node has none: a qualified node without IRI is a record without
        identifier, an element without IRI an error)."""
        return self.names(term.value) if isinstance(term, ox.NamedNode) else None

    def value(self, term: Any, where: str) -> Any:
        """An attribute value: a qualified name for an IRI, a string (or a typed or language-tagged literal)."""
        if isinstance(term, ox.NamedNode):
            return self.names(term.value)
        if isinstance(term, ox.Literal):
            if term.language:
                return pm.Literal(term.value, langtag=term.language)
            datatype = term.datatype.value
            if datatype == _XSD + "string":
                return term.value
            return pm.Literal(term.value, datatype=self.names(datatype))
        raise ValueError(f"{where}: a blank node has no PROV-DM form as a value")

    def time(self, term: Any, where: str) -> Any:
        """A time: an ``xsd:dateTime`` literal, as a datetime."""
        parsed = None
        if isinstance(term, ox.Literal) and term.datatype.value == _XSD + "dateTime":
            parsed = pm.parse_xsd_datetime(term.value)
        if parsed is None:
            raise ValueError(f"{where}: the time {term} is not an xsd:dateTime")
        return parsed

    def add(self, triples: Iterable[ox.Triple]) -> None:
        """Add the records of a view: its elements first, then its relations, each in the order of their IRIs."""
        triples = sorted(triples, key=lambda t: (_term_key(t.subject), _term_key(t.predicate), _term_key(t.object)))
        nodes: dict[Any, _Node] = defaultdict(_Node)
        relations: list[ox.Triple] = []
        for t in triples:
            local = _local(t.predicate.value)
            if t.predicate.value == _RDF_TYPE:
                if not isinstance(t.object, ox.NamedNode):
                    raise ValueError(f"{t}: a class that is not an IRI has no PROV-DM form")
                nodes[t.subject].classes.append(t.object.value)
            elif local in _RELATIONS or local in _QUALIFIED:
                relations.append(t)
            else:
                nodes[t.subject].properties.append((t.predicate.value, t.object))
        qualifying = [t for t in relations if _local(t.predicate.value) in _QUALIFIED]
        qualified_nodes = {t.object: nodes.pop(t.object, _Node()) for t in qualifying}
        for subject, node in nodes.items():
            self._element(subject, node)
        qualified = {t: self._qualified(t, qualified_nodes[t.object]) for t in qualifying}
        stands_for = {stood for _, stood in qualified.values()}
        for t in relations:
            local = _local(t.predicate.value)
            if t in qualified:
                self.bundle.new_record(*qualified[t][0])
            elif local is not None and (t.subject, local, t.object) not in stands_for:  # else its qualified record stands for it
                relation = _RELATIONS[local]
                other = [(pm.PROV_TYPE, relation.kind)] if relation.kind is not None else []
                formal = [(relation.subject, self.name(t.subject)), (relation.object, self.name(t.object))]
                self.bundle.new_record(relation.record, None, formal, other)

    def _qualified(self, t: ox.Triple, node: _Node) -> tuple[tuple[Any, ...], tuple[Any, str, Any]]:
        """The record of a qualified node (``t`` links it to its subject): the arguments of ``new_record``, and the
        ``(subject, relation, object)`` of the unqualified triple it stands for."""
        local = _local(t.predicate.value)
        assert local is not None
        relation_name, object_property = _QUALIFIED[local]
        relation = _RELATIONS[relation_name]
        where = f"the qualified node <{t.object.value}>" if isinstance(t.object, ox.NamedNode) else f"a prov:{local} node"
        formal: list[tuple[QualifiedName, Any]] = [(relation.subject, self.name(t.subject))]
        other: list[tuple[QualifiedName, Any]] = [(pm.PROV_TYPE, relation.kind)] if relation.kind is not None else []
        objects = []
        for predicate, value in node.properties:
            detail = _local(predicate)
            if detail == object_property:
                objects.append(value)
                formal.append((relation.object, self.name(value)))
            elif detail in _DETAILS and relation.record in _DETAILS[detail]:
                attribute = _DETAILS[detail][relation.record]
                formal.append((attribute, self.time(value, where) if attribute == pm.PROV_ATTR_TIME else self.name(value)))
            else:
                other.append(self._attribute(predicate, value, where))
        for cls in node.classes:
            if _local(cls) not in _QUALIFIED_CLASSES:
                other.append((pm.PROV_TYPE, self.names(cls)))
        if len(objects) != 1:
            raise ValueError(f"{where} names {len(objects)} prov:{object_property}; PROV-DM needs one")
        if len({attribute for attribute, _ in formal}) != len(formal):
            raise ValueError(f"{where} gives a formal attribute twice; a PROV-DM record has one of each")
        return (relation.record, self.name(t.object), formal, other), (t.subject, relation_name, objects[0])

    def _attribute(self, predicate: str, value: Any, where: str) -> tuple[QualifiedName, Any]:
        """An attribute from a property that is not a relation."""
        local = _local(predicate)
        if predicate == _RDFS_LABEL:
            return pm.PROV_LABEL, self.value(value, where)
        if local in _ATTRIBUTES:
            return _ATTRIBUTES[local], self.value(value, where)
        if local is not None:
            raise ValueError(f"{where}: prov:{local} has no PROV-DM form there")
        return self.names(predicate), self.value(value, where)

    def _element(self, subject: Any, node: _Node) -> None:
        """The records of a node: one per element class it has (none for a role or location)."""
        locals_ = [_local(cls) for cls in node.classes]
        if any(local in _VALUE_CLASSES for local in locals_) and not any(local in _ELEMENT_CLASSES for local in locals_):
            return  # a role or location: a value, whose label PROV-DM has no place for
        where = f"<{subject.value}>" if isinstance(subject, ox.NamedNode) else "a blank node"
        records = list(dict.fromkeys(_ELEMENT_CLASSES[local] for local in locals_ if local in _ELEMENT_CLASSES))
        if not records:
            what = ", ".join(f"<{p}>" for p, _ in node.properties) or "classes " + ", ".join(f"<{c}>" for c in node.classes)
            raise ValueError(f"{where} has {what} but is not a PROV entity, activity or agent")
        identifier = self.name(subject)
        if identifier is None:
            raise ValueError(f"{where}: an element without an IRI has no PROV-DM identifier")
        types = [(pm.PROV_TYPE, self.names(cls)) for cls, local in zip(node.classes, locals_, strict=True) if local not in ("Entity", "Activity", "Agent")]
        for record in records:
            formal: list[tuple[QualifiedName, Any]] = []
            other = list(types)
            for predicate, value in node.properties:
                local = _local(predicate)
                if record == pm.PROV_ACTIVITY and local in ("startedAtTime", "endedAtTime"):
                    formal.append((pm.PROV_ATTR_STARTTIME if local == "startedAtTime" else pm.PROV_ATTR_ENDTIME, self.time(value, where)))
                elif local in ("startedAtTime", "endedAtTime") or (record != pm.PROV_ENTITY and local in ("generatedAtTime", "invalidatedAtTime")):
                    raise ValueError(f"{where}: prov:{local} on a {record.localpart}")
                elif local in ("generatedAtTime", "invalidatedAtTime"):
                    event = pm.PROV_GENERATION if local == "generatedAtTime" else pm.PROV_INVALIDATION
                    self.bundle.new_record(event, None, [(pm.PROV_ATTR_ENTITY, identifier), (pm.PROV_ATTR_TIME, self.time(value, where))])
                else:
                    other.append(self._attribute(predicate, value, where))
            if len({attribute for attribute, _ in formal}) != len(formal):
                raise ValueError(f"{where} has two start or two end times; a PROV-DM activity has one of each")
            self.bundle.new_record(record, identifier, formal, other)


def prov_document(views: Iterable[tuple[str, list[ox.Triple]]], progress: Callable[[int], None] | None = None) -> pm.ProvDocument:
    """One PROV document of ``(trace IRI, view triples)`` pairs (what :func:`~dspy_rdf.interop.prov.prov_view`
    gives): a bundle per trace, named ``<trace IRI>/prov`` (empty for a trace whose view is), in the given order."""
    document = pm.ProvDocument()
    names = _Names(document)
    for trace_iri, triples in views:
        names.declare_trace(trace_iri)
        try:
            _Bundle(document.bundle(names(prov_graph_name(trace_iri))), names).add(triples)
        except (ValueError, pm.ProvException) as exc:
            raise ValueError(f"the PROV view of {trace_iri}: {exc}") from exc
        if progress is not None:
            progress(1)
    return document


def write_prov_document(
    store: TraceStore, handle: BinaryIO, *, format: str, traces: Iterable[str] | None = None, progress: Callable[[int], None] | None = None
) -> int:
    """Write the view of each trace (each in its bundle) as one PROV-JSON, PROV-N or PROV-XML document (``format``:
    a key of :data:`FORMATS`); return the number of traces."""
    if format not in FORMATS:
        raise ValueError(f"unknown PROV document format {format!r}: one of {', '.join(FORMATS)}")
    if format == "provxml":
        check_xml_support()
    document = prov_document(prov_view(store, None if traces is None else dict.fromkeys(traces)), progress)
    count = sum(1 for _ in document.bundles)
    if format == "provxml":
        document = to_xml_names(document)
    options: dict[str, Any] = {"indent": 2} if format == "provjson" else {}
    document.serialize(handle, format=FORMATS[format], **options)
    return count


def check_xml_support() -> None:
    """An ``ImportError`` saying what to install when the prov package cannot write PROV-XML (it needs lxml)."""
    try:
        import prov.serializers.provxml  # noqa: F401
    except ImportError as exc:
        raise ImportError(MISSING_PROV) from exc


# PROV-XML names -------------------------------------------------------------------------------------------------

_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9._-]*")
_ESCAPE = re.compile(r"_x[0-9A-F]{4}(?:[0-9A-F]{4})?_")


def _escape_local(local: str) -> str:
    """``local`` as an XML name: each character an XML name cannot have there (and each ``_`` before ``x``) as
    ``_xHHHH_`` (``_xHHHHHHHH_`` beyond the BMP); a local part that needs none is unchanged."""
    if _XML_NAME.fullmatch(local) and "_x" not in local:
        return local
    out = []
    for i, char in enumerate(local):
        allowed = char.isascii() and (char.isalpha() or char == "_" or (i > 0 and (char.isdigit() or char in ".-")))
        if allowed and not (char == "_" and local[i + 1 : i + 2] == "x"):
            out.append(char)
        else:
            out.append(f"_x{ord(char):04X}_" if ord(char) <= 0xFFFF else f"_x{ord(char):08X}_")
    return "".join(out)


def _unescape_local(local: str) -> str:
    """The inverse of :func:`_escape_local`."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(0)[2:-1], 16)), local)


def _renamed(document: pm.ProvDocument, rename: Callable[[str], str]) -> pm.ProvDocument:
    """A copy of ``document`` with the local part of each qualified name (identifiers and values) renamed."""

    def name(value: Any) -> Any:
        if isinstance(value, QualifiedName):
            return value.namespace[rename(value.localpart)]
        return value

    def copy(source: pm.ProvBundle, target: pm.ProvBundle) -> None:
        for record in source.get_records():
            target.new_record(
                record.get_type(),
                name(record.identifier),
                [(attribute, name(value)) for attribute, value in record.formal_attributes],
                [(attribute, name(value)) for attribute, value in record.extra_attributes],
            )

    renamed = pm.ProvDocument()
    for namespace in document.get_registered_namespaces():
        renamed.add_namespace(namespace)
    copy(document, renamed)
    for bundle in document.bundles:
        copy(bundle, renamed.bundle(name(bundle.identifier)))
    return renamed


def to_xml_names(document: pm.ProvDocument) -> pm.ProvDocument:
    """The document with every local part that is not an XML name escaped (``call/0`` as ``call_x002F_0``), so that
    its PROV-XML is valid: PROV-XML identifiers are ``xsd:QName``."""
    return _renamed(document, _escape_local)


def from_xml_names(document: pm.ProvDocument) -> pm.ProvDocument:
    """The document :func:`to_xml_names` was given, from the one it made (e.g. read back from PROV-XML)."""
    return _renamed(document, _unescape_local)


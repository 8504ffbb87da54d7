"""IRIs of the ``dspy:`` vocabulary and of the standard terms the mapping uses."""

from __future__ import annotations

from dspy_rdf.canonical import schema_tables

DSPY = "https://w3id.org/lmodel/dspy/"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
XSD = "http://www.w3.org/2001/XMLSchema#"
DCTERMS = "http://purl.org/dc/terms/"

LEDGER = "urn:dspy-rdf:ledger:"
"""The namespace of a store's ledger (the names of its graphs, rows and properties: :mod:`dspy_rdf.store.ledger`). A
dump may carry the ledger's graph (``dump --with-ledger``); readers of traces leave it out."""

RDF_TYPE = RDF + "type"
RDF_JSON = RDF + "JSON"
XSD_STRING = XSD + "string"
XSD_INTEGER = XSD + "integer"
XSD_DOUBLE = XSD + "double"
XSD_DECIMAL = XSD + "decimal"
XSD_BOOLEAN = XSD + "boolean"
XSD_DATETIME = XSD + "dateTime"
XSD_DATE = XSD + "date"

SLOT_URIS = schema_tables.SLOT_URIS
"""Slots whose schema ``slot_uri`` is not ``dspy:<slot name>`` (generated from the schema)."""

PREFIXES = {
    "dspy": DSPY,
    "rdf": RDF,
    "rdfs": RDFS,
    "xsd": XSD,
    "dcterms": DCTERMS,
}
"""Prefixes written into Turtle, TriG and JSON-LD output."""


DECIMAL_SLOTS = schema_tables.DECIMAL_SLOTS
"""The slots whose values are ``xsd:decimal`` (the schema's ``range: decimal``, generated from the schema). A server may keep an integral
decimal as an integer (Virtuoso 7 does): reading a trace back from it restores the type of these slots."""


def slot_iri(slot: str) -> str:
    """IRI of the property for a schema slot."""
    return SLOT_URIS.get(slot, DSPY + slot)


def class_iri(cls: str) -> str:
    """IRI of a schema class."""
    return DSPY + cls

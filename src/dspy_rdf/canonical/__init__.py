"""The canonical model of an LM trace, whatever it was read from: its classes (:mod:`.model`), the plain-JSON values
it holds (:mod:`.fields`), the trace's key and IRI (:mod:`.identity`), tool calls paired with their results
(:mod:`.pairing`), the package's errors (:mod:`.errors`) and the redaction of secrets (:mod:`.redact`).

This layer imports no source, no RDF and no store: everything else builds on it.
"""

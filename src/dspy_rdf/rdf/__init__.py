"""The model as RDF with the ``dspy:`` vocabulary: the vocabulary's terms (:mod:`.vocab`, :mod:`.terms`), the
writer (:mod:`.writer`) and reader (:mod:`.reader`) of one trace's graph, the RDF file formats (:mod:`.formats`),
and files of quads in any order, read trace by trace (:mod:`.quadfiles`)."""

RDF_SUFFIXES = {".ttl": "ttl", ".turtle": "ttl", ".nt": "nt", ".ntriples": "nt", ".nq": "nq", ".nquads": "nq", ".trig": "trig", ".jsonld": "jsonld"}
"""RDF files by extension, with the :class:`~dspy_rdf.rdf.formats.RdfFormat` value of each: the one table every reader
and writer of files goes by (here, so that telling a file's kind imports no RDF library)."""

"""The model as RDF with the ``dspy:`` vocabulary: the vocabulary's terms (:mod:`.vocab`, :mod:`.terms`), the
writer (:mod:`.writer`) and reader (:mod:`.reader`) of one trace's graph, the RDF file formats (:mod:`.formats`),
and files of quads in any order, read trace by trace (:mod:`.quadfiles`)."""

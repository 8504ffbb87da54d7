"""The ``dspy-rdf`` command: its entry point (:mod:`.launch`), its parser and commands (:mod:`.main`) and the
bundled demo (:mod:`.demo`). Nothing is imported here, so that the entry point starts before anything else loads."""

"""The ``dspy-rdf`` command: its entry point (:mod:`.launch`), the run of one command line (:mod:`.main`), the parser
(:mod:`.parser`), the commands over the library (:mod:`.commands`), what the command shows and how it stops
(:mod:`.console`), and the bundled demo (:mod:`.demo`). Nothing is imported here, so that the entry point starts
before anything else loads."""

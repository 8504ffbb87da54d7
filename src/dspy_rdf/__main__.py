"""``python -m dspy_rdf``: the ``dspy-rdf`` command."""

import sys

from dspy_rdf.cli.launch import main

if __name__ == "__main__":  # not when a spawned worker process imports the parent's main module
    sys.exit(main())

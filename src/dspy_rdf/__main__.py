"""``python -m dspy_rdf``: the ``dspy-rdf`` command."""

import sys

from dspy_rdf.cli.launch import main

sys.exit(main())

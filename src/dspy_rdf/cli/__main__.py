"""``python -m dspy_rdf.cli``: the ``dspy-rdf`` command."""

import sys

from dspy_rdf.cli.launch import main

sys.exit(main())

"""The ``dspy-rdf`` command's entry point, and ``python -m dspy_rdf``'s.

It imports the command line and nothing else before: a Ctrl-C while Python loads it (tens of milliseconds on a cold
start) ends the command with one line and exit code 130, as a Ctrl-C at any later moment does
(:func:`dspy_rdf.cli.main.main`), instead of a traceback.
"""

import sys


def main() -> int:
    """Run the ``dspy-rdf`` command line; return its exit code."""
    try:
        from dspy_rdf.cli.main import main as run_command_line
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return run_command_line()

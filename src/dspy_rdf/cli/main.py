"""The ``dspy-rdf`` command: a thin layer over the library.

Exit codes: 0 success; 1 something was skipped or does not conform; 2 usage or input error; 130 when interrupted
(Ctrl-C), 143 when terminated (SIGTERM).

The command's parts: :mod:`.parser` (every command and option), :mod:`.commands` (what each does, over the library)
and :mod:`.console` (what the command shows, and how it stops). Loading this module imports nothing but ``io``,
``os``, ``sys`` (loaded with Python) and ``contextlib``, through :mod:`.console`: every other import, of the standard
library too, happens in :func:`main`, under its handler of Ctrl-C, so that a Ctrl-C at any moment of the start is
one line.
"""

from __future__ import annotations

import sys

from dspy_rdf.cli.console import MESSAGES, Interrupted, os_message, print_error, stdout_written_whole, stopped_by_signals

__all__ = ["Interrupted", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code: 0, 1 (see the module docstring), 2 on an error, 128 + the signal
    when one stopped it (130 Ctrl-C, 143 SIGTERM). Everything, imports and the parser included, runs under the
    handler of those signals: a Ctrl-C at any moment is one line, never a traceback."""
    try:
        with stopped_by_signals():
            return _run(argv)
    except KeyboardInterrupt as exc:
        import signal

        signum = exc.signal if isinstance(exc, Interrupted) else signal.SIGINT
        print("terminated" if signum == signal.SIGTERM else "interrupted", file=sys.stderr)
        return 128 + signum


def _run(argv: list[str] | None) -> int:
    """Parse the command line and run the command, each error reported as one line."""
    from dspy_rdf.canonical.errors import DspyRdfError

    with MESSAGES.redacting_stderr():
        try:
            with stdout_written_whole():
                from dspy_rdf.cli.parser import build_parser

                args = build_parser().parse_args(argv)
                if hasattr(args, "no_redact"):  # a command with redaction options: its messages follow them
                    from dspy_rdf.cli.commands import redactor_for

                    MESSAGES.follow(redactor_for(args))
                return args.run(args)
        except BrokenPipeError:  # the reader of our output went away (`dspy-rdf dump | head`)
            print_error("the output was closed before everything was written (broken pipe)")
            return 2
        except (DspyRdfError, ValueError, OSError) as exc:  # dspy-rdf's own errors, bad input, files, disk, network
            print_error(os_message(exc) if type(exc).__module__ == "builtins" and isinstance(exc, OSError) else str(exc))
            return 2


if __name__ == "__main__":
    sys.exit(main())

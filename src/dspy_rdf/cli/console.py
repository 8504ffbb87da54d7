"""What the command shows, and how it stops: one-line errors and summaries with secrets redacted and terminal
control characters escaped, progress bars, standard output written whole, and SIGINT or SIGTERM as one line.

Loading it imports nothing Python has not loaded at start but ``contextlib`` and :mod:`dspy_rdf.outputs`: the
command line's entry point imports it before its handler of Ctrl-C is in place.
"""

from __future__ import annotations

import io
import os
import sys
from contextlib import contextmanager

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start (type checkers take it as theirs)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

from dspy_rdf.outputs import WholeWrites, is_standard_output, output_target


def output_name(path: Path | None) -> str:
    """An output as messages name it."""
    return "standard output" if output_target(path) is None else str(path)


def summary_stream(output: Path | None) -> Any:
    """Where a command that writes ``output`` prints its summary: standard output, unless the data goes there."""
    return sys.stderr if is_standard_output(output) else sys.stdout


@contextmanager
def progress_bar(total: Callable[[], int], **options: Any) -> Iterator[Callable[[int], None] | None]:
    """A tqdm progress bar on stderr when it is a terminal (and tqdm is installed); else nothing. ``total`` is only
    called when a bar is shown (counting may cost a listing of the store)."""
    if not sys.stderr.isatty():
        yield None
        return
    try:
        from tqdm import tqdm
    except ImportError:
        yield None
        return
    with tqdm(total=total(), file=sys.stderr, leave=False, **options) as bar:
        yield bar.update


def reading_progress(files: list[Path]):
    """A byte-count progress bar over ``files`` (see :func:`progress_bar`)."""
    return progress_bar(lambda: sum(path.stat().st_size for path in files if path.exists()), unit="B", unit_scale=True, desc="reading")


def print_error(message: str) -> None:
    """One line on stderr (which redacts secrets, see :class:`Messages`)."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)


def say(message: str, file: Any = None) -> None:
    """Print a message of the command (a summary) on standard output, or on ``file``, with secrets redacted."""
    print(MESSAGES.shown(message), file=file or sys.stdout)


class Messages:
    """The one redaction point of what the command says: errors, warnings and summaries. Everything written to
    standard error passes through :meth:`shown` (see :meth:`redacting_stderr`), and so does every summary printed on
    standard output (:func:`say`). Secrets are redacted as exports redact them, by the default patterns, or for a
    command with redaction options by its ``--redact-pattern`` and ``--redact-field`` too, or not at all with its
    ``--no-redact``. The data a command writes (dumps, query results, reports) is not a message."""

    def __init__(self) -> None:
        self.redact: Callable[[str], str] | None = self.default

    @staticmethod
    def default(text: str) -> str:
        from dspy_rdf.canonical.errors import shown

        return shown(text)

    def shown(self, text: str) -> str:
        """``text`` as the command may show it: redacted, and with the control characters a terminal would act on
        (escape sequences, a bell, bidirectional overrides) written as escapes."""
        from dspy_rdf.analytics.terminal import terminal_text

        return terminal_text(text if self.redact is None else self.redact(text))

    def follow(self, redactor: Any) -> None:
        """Redact as a command's own redaction options say (``redactor``, None for ``--no-redact``)."""
        self.redact = None if redactor is None else redactor.redact_text

    @contextmanager
    def redacting_stderr(self) -> Iterator[None]:
        """Standard error, for the block, through :meth:`shown`; then as it was, and the default redaction again."""
        original = sys.stderr
        sys.stderr = RedactedStream(original, self.shown)
        try:
            yield
        finally:
            sys.stderr = original
            self.redact = self.default


class RedactedStream:
    """A text stream that writes to ``stream`` what ``shown`` makes of each text; anything else is the stream's."""

    def __init__(self, stream: Any, shown: Callable[[str], str]) -> None:
        self._stream = stream
        self._shown = shown

    def write(self, text: str) -> int:
        self._stream.write(self._shown(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


MESSAGES = Messages()


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal: ``signal`` is SIGINT (Ctrl-C) or SIGTERM. A KeyboardInterrupt, so that
    what cleans up after Ctrl-C (temporary outputs, worker processes) cleans up after SIGTERM too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal = signum


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread. The first one stops the
    command; the ones after it are ignored, so that a second Ctrl-C cannot break the cleanup the first one started.
    A signal ignored by whoever started the command (``nohup``, a background job of a script) stays ignored. The
    handlers before are put back when the block ends, unless a signal stopped it (the process is ending)."""
    import signal

    stops = [number for number in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(number) is not signal.SIG_IGN]

    def stop(signum: int, frame: object) -> None:
        for number in stops:
            signal.signal(number, signal.SIG_IGN)
        raise Interrupted(signum)

    try:
        previous = {number: signal.signal(number, stop) for number in stops}
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    except Interrupted:
        raise
    except BaseException:
        _restore_handlers(previous)
        raise
    _restore_handlers(previous)


def _restore_handlers(handlers: dict) -> None:
    import signal

    for number, handler in handlers.items():
        signal.signal(number, handler)


@contextmanager
def stdout_written_whole() -> Iterator[None]:
    """Standard output for the command, written whole or not at all: a write raises BrokenPipeError when the reader
    has gone, and the block ends with a flush, so that every command reports a broken pipe (Python's own standard
    output takes a large write in part when its reader goes away meanwhile, and says nothing). After a broken pipe,
    the output is sent to /dev/null: what is still buffered must not fail again when Python exits."""
    original = sys.stdout
    try:
        fd = original.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test capturing the output): nothing to do
        yield
        return
    original.flush()
    raw = WholeWrites(fd, shown_as="standard output", closefd=False)
    stream = io.TextIOWrapper(
        io.BufferedWriter(raw, buffer_size=1 << 16), encoding=original.encoding, errors=original.errors, line_buffering=bool(original.line_buffering)
    )
    sys.stdout = stream
    try:
        yield
        stream.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
        raise
    finally:
        sys.stdout = original
        try:
            stream.flush()
        except OSError:
            pass  # the output failed while another error is reported: that error is the one to show


def os_message(exc: OSError) -> str:
    """An OS error as one line naming the file: ``writing out.nq failed: No space left on device``."""
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason

r"""Output files written whole or not at all: what the command line writes, and what a program can write the same way.

:func:`open_output` gives a handle on a file, standard output or a device; a regular file is written to a temporary
file beside it that replaces it only when the block ends without an error, so a failure (a full disk, Ctrl-C, a
trace that cannot be written) leaves the previous file as it was and no half-written one. Errors name the output as
it was given. Loading this module imports only what Python has loaded at start.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "out.nq"
>>> with open_output(path) as handle:
...     _ = handle.write(b"<urn:a> <urn:b> <urn:c> .\n")
>>> path.read_bytes()
b'<urn:a> <urn:b> <urn:c> .\n'
"""

from __future__ import annotations

import io
import os
import sys
from contextlib import contextmanager

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start (type checkers take it as theirs)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any, BinaryIO

__all__ = ["STANDARD_OUTPUT", "WholeWrites", "is_standard_output", "open_output", "output_target"]

STANDARD_OUTPUT = "-"
"""What an output option takes to mean standard output."""


def output_target(path: str | os.PathLike[str] | None) -> Path | None:
    """Where an output option writes, checked before any work: ``None`` for standard output (no option, or ``-``);
    a directory is refused; a symbolic link to a file is written through (to its target), as other tools do; a
    device, FIFO or pipe (``/dev/stdout``, ``/dev/null``) is the path itself."""
    import stat
    from pathlib import Path

    if path is None or str(path) == STANDARD_OUTPUT:
        return None
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:  # a new file (or a link to one)
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise ValueError(f"{path} is a directory; give the name of a file to write")
    if mode is not None and not stat.S_ISREG(mode):
        return path
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def is_standard_output(path: str | os.PathLike[str] | None) -> bool:
    """Whether an output option names standard output (``-``, or ``/dev/stdout`` and the like): the command's
    messages then go to standard error, apart from the data."""
    target = output_target(path)
    if target is None:
        return True
    try:
        here, out = os.stat(target), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (here.st_dev, here.st_ino) == (out.st_dev, out.st_ino)


def _naming(error: OSError, path: str | os.PathLike[str]) -> OSError:
    """The same error (the same subclass: it follows the errno) naming ``path``, the output the user gave: the name
    of a temporary file, or none at all, would not tell which output failed."""
    return OSError(error.errno, error.strerror, str(path))


@contextmanager
def open_output(path: str | os.PathLike[str] | None) -> Iterator[BinaryIO]:
    """A binary handle on what an output option names (see :func:`output_target`).

    A regular file is written through a temporary file beside it that replaces it (or the target of the link
    ``path`` is) only if the block succeeds, so a failure never leaves half a file and never touches an existing
    one; the file gets the mode an existing file had, else the one the umask gives a new file (as ``open`` would).
    Standard output, a device, a FIFO or a pipe is written directly: nothing can be renamed over it. Errors name
    ``path``."""
    import secrets
    from pathlib import Path

    target = output_target(path)
    if target is None:
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    shown = str(path)  # not None: None is standard output
    if target.exists() and not target.is_file():
        try:
            fd = os.open(target, os.O_WRONLY)
        except OSError as exc:
            raise _naming(exc, shown) from None
        with io.BufferedWriter(WholeWrites(fd, shown_as=shown, closefd=True)) as handle:
            yield handle
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    # The temporary file's name is chosen before the file is made, so that a signal at any moment (even as the file
    # is being created) leaves nothing behind: whatever ends the block removes the file by that name.
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    to_remove: Path | None = tmp
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        except FileExistsError as exc:  # another file has this name: not ours to remove
            to_remove = None
            raise _naming(exc, shown) from None
        except OSError as exc:
            raise _naming(exc, shown) from None
        with io.BufferedWriter(WholeWrites(fd, shown_as=shown, closefd=True)) as handle:
            yield handle
            handle.flush()
            try:
                os.fchmod(handle.fileno(), mode)
            except OSError as exc:
                raise _naming(exc, shown) from None
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise _naming(exc, shown) from None
    except BaseException:
        if to_remove is not None:
            to_remove.unlink(missing_ok=True)
        raise


class WholeWrites(io.FileIO):
    """A raw file on a file descriptor whose writes write all they are given, or raise an error naming
    ``shown_as`` (the output as the user gave it)."""

    def __init__(self, fd: int, *, shown_as: str, closefd: bool) -> None:
        super().__init__(fd, "wb", closefd=closefd)
        self.shown_as = shown_as

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        try:
            while view:
                view = view[os.write(self.fileno(), view):]
        except OSError as exc:
            raise _naming(exc, self.shown_as) from None
        return total

"""How far a load of JSON Lines files into a store has come, so that a load that was stopped (Ctrl-C, a killed
process, a server that went away) starts again where it stood instead of reading every file from its start.

A :class:`LoadJournal` is a small JSON file beside the store (``STORE.load.json`` beside an embedded store,
``.dspy-rdf/load-<hash>.json`` for a server). As :meth:`~dspy_rdf.store.base.TraceStore.put` commits, it records for
each file the last :class:`~dspy_rdf.inputs.ResumePoint` before which every trace is stored (or was refused, or was a
repeat), and whether the file was read to its end. The next load of the same file into the same store reads it from
there, after checking that it is the same file up to that point (its size, and digests of its first and last 64 KiB
before the point) and that the store still holds the last trace written before it; anything else reads the file
from its start, and the traces already stored are then left as they are, as always. A load that completes forgets
its files, so a later load of them reads them whole again (and reports them as already stored).

Files of other formats (``.json``, RDF) and OTLP JSON Lines (whose traces span lines) are resumed per whole file
only: where a file was read to its end, it is not read again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
import typing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from dspy_rdf.inputs import InputItem, ResumePoint

__all__ = ["FileStart", "LoadJournal", "journal_path"]

_WINDOW = 64 * 1024  # bytes digested at each end of what a journal vouches for
_WRITE_EVERY = 1.0  # seconds between writes of the journal while a load runs
_VERSION = 1


def journal_path(location: str) -> Path:
    """Where the journal of loads into the store at ``location`` (a directory, or a server's URL) is kept."""
    if "://" in location:
        return Path(".dspy-rdf") / f"load-{hashlib.sha256(location.encode()).hexdigest()[:12]}.json"
    return Path(f"{Path(location).resolve()}.load.json")


@dataclass(frozen=True)
class _Entry:
    """What the journal says of one file: where to read it again from, whether it was read whole, and how to know it
    is the same file (``size`` when recorded, digests of the 64 KiB at each end of ``offset``), and the last trace
    written before the point, which the store must still hold."""

    offset: int
    line: int
    items: int
    done: bool
    size: int
    head: str
    tail: str
    check: str | None


@dataclass(frozen=True)
class FileStart:
    """Where a load reads a file from: ``skip`` (read whole by the stopped load, unchanged since), ``point`` (from
    there), or neither (from its start); ``note`` says why, for the user (None: nothing to say)."""

    skip: bool = False
    point: ResumePoint | None = None
    note: str | None = None


_ENTRY_TYPES = typing.get_type_hints(_Entry)
"""The type of each field of an entry, as a journal file must hold it."""


def _entry(fields: dict) -> _Entry:
    """An entry as the journal file holds it (TypeError when a field is missing or of another type)."""
    if set(fields) != set(_ENTRY_TYPES) or not all(isinstance(fields[k], t) for k, t in _ENTRY_TYPES.items()):
        raise TypeError("an entry of unexpected fields")
    if any(isinstance(fields[k], bool) or fields[k] < 0 for k in ("offset", "line", "items", "size")):
        raise TypeError("an entry with a negative position")
    return _Entry(**fields)


def _digests(path: Path, offset: int) -> tuple[str, str]:
    with path.open("rb") as handle:
        head = handle.read(min(_WINDOW, offset))
        handle.seek(max(0, offset - _WINDOW))
        tail = handle.read(min(_WINDOW, offset))
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()


class LoadJournal:
    """The journal of loads into one store (see the module docstring). Thread-safe: ``settled`` is called by the
    store's writer thread while the load's own thread hands out traces."""

    def __init__(self, path: Path, *, stored: Callable[[list[str]], set[str]], warn: Callable[[str], None] = lambda message: None) -> None:
        self.path = path
        self._stored = stored
        self._warn = warn
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._handed = 0  # traces handed to the store so far
        self._marks: deque[tuple[int, Path, ResumePoint, bool]] = deque()  # (traces handed by then, file, point, done)
        self._last_written: str | None = None
        self._last_write = 0.0
        self._dirty = False
        self._unwritable = False
        self._read()

    def _read(self) -> None:
        if not self.path.exists():
            return
        try:
            value = json.loads(self.path.read_text(encoding="utf-8"))
            if value.get("version") != _VERSION:
                raise ValueError(f"version {value.get('version')!r}")
            self._entries = {name: _entry(fields) for name, fields in value["inputs"].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            self._warn(f"{self.path}: not a load journal this version reads ({type(exc).__name__}); inputs are read from their start")
            self._entries = {}

    def start_of(self, path: Path) -> FileStart:
        """Where to read ``path`` from, by what an interrupted load of it into this store recorded."""
        entry = self._entries.get(str(path.resolve()))
        if entry is None:
            return FileStart()
        try:
            size = path.stat().st_size
            fits = size == entry.size if entry.done else size >= entry.offset
            same = fits and _digests(path, entry.offset) == (entry.head, entry.tail)
        except OSError:
            same = False
        if not same:
            return FileStart(note=f"{path} changed since a load into this store stopped in it: reading it from its start")
        if entry.check is not None and not self._stored([entry.check]):
            return FileStart(note=f"the store no longer holds what a load stopped in {path} had written: reading it from its start")
        if entry.done:  # the same size and ends as when it was read whole
            return FileStart(skip=True, note=f"{path}: stored whole by a load that stopped after it; not read again")
        point = ResumePoint(entry.offset, entry.line, entry.items)
        return FileStart(point=point, note=f"resuming {path} after line {entry.line} ({entry.offset:,} of {size:,} bytes stored before)")

    def items(self, path: Path, items: Iterable[InputItem]) -> Iterator[InputItem]:
        """Pass the items of ``path`` through, noting where it could be read again from as its traces are handed on
        (the caller hands each trace to the store before asking for the next item)."""
        last_point: ResumePoint | None = None
        for item in items:
            with self._lock:
                if item.trace is not None:
                    self._handed += 1
                if item.resume is not None:
                    self._marks.append((self._handed, path, item.resume, False))
                    last_point = item.resume
            yield item
        with self._lock:  # read to its end
            self._marks.append((self._handed, path, last_point or ResumePoint(0, 0, 0), True))

    def settled(self, count: int, written: list[str]) -> None:
        """The hook for :meth:`~dspy_rdf.store.base.TraceStore.put`'s ``settled``: the first ``count`` traces handed
        on are done with."""
        with self._lock:
            if written:
                self._last_written = written[-1]
            while self._marks and self._marks[0][0] <= count:
                _, path, point, done = self._marks.popleft()
                self._note(path, point, done)
            due = self._dirty and time.monotonic() - self._last_write >= _WRITE_EVERY
        if due:
            self.write()

    def _note(self, path: Path, point: ResumePoint, done: bool) -> None:
        try:
            size = path.stat().st_size
            offset = size if done else point.offset
            head, tail = _digests(path, offset)
        except OSError:
            return
        self._entries[str(path.resolve())] = _Entry(offset, point.line, point.items, done, size, head, tail, self._last_written)
        self._dirty = True

    def write(self) -> None:
        """Write the journal now (atomically: a reader sees the old one or the new one); a journal that cannot be
        written is said once, and the load goes on (a stopped load then reads its files from their start)."""
        with self._lock:
            if not self._dirty or self._unwritable:
                return
            value = {"version": _VERSION, "inputs": {name: asdict(entry) for name, entry in self._entries.items()}}
            self._dirty = False
            self._last_write = time.monotonic()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=self.path.name, suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(value, handle)
            os.replace(temporary, self.path)
        except OSError as exc:
            self._unwritable = True
            self._warn(f"the load journal {self.path} cannot be written ({exc.strerror or exc}); a stopped load will read its inputs from their start")

    def forget(self, paths: Iterable[Path]) -> None:
        """The load of ``paths`` completed: drop them from the journal (removed when nothing is left)."""
        with self._lock:
            for path in paths:
                self._entries.pop(str(path.resolve()), None)
            self._marks.clear()
            empty = not self._entries
            self._dirty = True
        if empty:
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass
            with self._lock:
                self._dirty = False
        else:
            self.write()

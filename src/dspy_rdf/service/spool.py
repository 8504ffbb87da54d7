"""A durable spool of the span exports a receiver has taken: what is acknowledged is on disk before the answer goes.

The spool is a directory of segment files (``segment-<first record number>.log``), each a run of records: a 4-byte
magic, the payload's length and its CRC-32, then the payload (bytes the receiver can read again: an export request as
it came). A record
is appended and the file ``fsync``-ed before :meth:`Spool.append` returns, so a receiver that answers only after it
returns never acknowledges spans a crash can lose. A crash in the middle of an append leaves a torn last record,
which was never acknowledged: opening the spool cuts it off.

``checkpoint.json`` holds the number of the first record that may still be needed: every trace with a span in an
earlier record is in the store; and the ids of the stored traces that also have spans from that record on (read
again, they would make a part of the trace, which must not be stored as a trace of its own). It is written atomically (a temporary file renamed over it, then the directory
synced) and only ever moves forward; segments wholly before it are deleted. At start, the records from the checkpoint
on are read again: a trace read from them that the store already holds is left as it is (a trace's IRI is a
function of its execution), so reading a record twice never writes anything twice.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspy_rdf.canonical.errors import DspyRdfError

__all__ = ["SEGMENT_BYTES", "Spool", "SpoolError", "SpoolStats"]

_MAGIC = b"DRS1"
_HEADER = struct.Struct(">4sII")  # magic, payload length, CRC-32 of the payload
SEGMENT_BYTES = 64 * 1024 * 1024
"""A segment is closed and a new one begun once it holds this many bytes."""


class SpoolError(DspyRdfError, OSError):
    """The spool cannot be read or written (its directory, the disk)."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


@dataclass
class SpoolStats:
    """Where a spool stands: records appended since it was opened, the next record's number, the checkpoint, and
    the bytes its segments hold."""

    appended: int
    next_record: int
    checkpoint: int
    bytes: int


def _segment_name(first: int) -> str:
    return f"segment-{first:012d}.log"


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    """An append-only, fsynced log of exports with a checkpoint (see the module docstring). Thread-safe."""

    def __init__(self, directory: Path | str, *, segment_bytes: int = SEGMENT_BYTES, owner: str | None = None) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # it holds spans before redaction
        except OSError as exc:
            raise SpoolError(f"cannot create the spool directory {self.directory}: {exc.strerror or exc}", path=self.directory) from None
        self._lock_handle = self._take_lock()
        if owner is not None:
            self._check_owner(owner)
        self._lock = threading.Lock()
        self.checkpoint, self.stored_traces = self._read_checkpoint()
        self.torn_bytes = 0  # bytes of a torn last record cut off at opening
        self._segments = self._scan()  # first record number -> path, in order
        last_first = max(self._segments) if self._segments else self.checkpoint
        self.next_record = last_first + (self._count_and_repair(self._segments[last_first]) if self._segments else 0)
        self.next_record = max(self.next_record, self.checkpoint)
        self.appended = 0
        self._handle: Any = None
        self._current_first = last_first if self._segments else None

    def _take_lock(self) -> Any:
        """Hold the spool for this process: two receivers appending to one spool would number their records alike."""
        import fcntl

        handle = (self.directory / "lock").open("a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise SpoolError(f"the spool {self.directory} is in use by another process (another dspy-rdf serve?)", path=self.directory) from None
        return handle

    def _check_owner(self, owner: str) -> None:
        """A spool belongs to one store: refuse to read another store's spans into this one."""
        path = self.directory / "store.txt"
        if path.exists():
            found = path.read_text(encoding="utf-8").strip()
            if found != owner:
                raise SpoolError(
                    f"the spool {self.directory} holds spans for the store {found}, not {owner}: give each store a spool of its own (--spool)",
                    path=self.directory,
                )
        else:
            path.write_text(owner + "\n", encoding="utf-8")

    # --- reading ----------------------------------------------------------------------------------------------

    def _read_checkpoint(self) -> tuple[int, list[str]]:
        path = self.directory / "checkpoint.json"
        if not path.exists():
            return 0, []
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            value, stored = doc["next_needed"], doc.get("stored_traces", [])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SpoolError(f"{path}: not a spool checkpoint ({exc}); move the spool aside to start afresh", path=path) from None
        if not isinstance(value, int) or value < 0:
            raise SpoolError(f"{path}: next_needed must be a record number, got {value!r}", path=path)
        if not isinstance(stored, list) or not all(isinstance(x, str) for x in stored):
            raise SpoolError(f"{path}: stored_traces must be a list of trace ids", path=path)
        return value, stored

    def _scan(self) -> dict[int, Path]:
        found = {}
        for path in sorted(self.directory.glob("segment-*.log")):
            try:
                found[int(path.stem.split("-", 1)[1])] = path
            except ValueError:
                continue
        return dict(sorted(found.items()))

    @staticmethod
    def _records(path: Path) -> Iterator[tuple[int, bytes | None]]:
        """``(offset, payload)`` for each whole record of a segment; a torn or corrupt tail gives ``(offset, None)``
        once, and ends the segment."""
        with path.open("rb") as handle:
            offset = 0
            while True:
                header = handle.read(_HEADER.size)
                if not header:
                    return
                if len(header) < _HEADER.size:
                    yield offset, None
                    return
                magic, length, crc = _HEADER.unpack(header)
                payload = handle.read(length) if magic == _MAGIC else b""
                if magic != _MAGIC or len(payload) < length or zlib.crc32(payload) != crc:
                    yield offset, None
                    return
                yield offset, payload
                offset += _HEADER.size + length

    def _count_and_repair(self, path: Path) -> int:
        """The number of whole records of the last segment, cutting off a torn record at its end (one that was being
        appended when the process stopped: it was never acknowledged)."""
        count = 0
        for offset, payload in self._records(path):
            if payload is None:
                self.torn_bytes = path.stat().st_size - offset
                with path.open("r+b") as handle:
                    handle.truncate(offset)
                    os.fsync(handle.fileno())
                break
            count += 1
        return count

    def replay(self) -> Iterator[tuple[int, bytes]]:
        """``(record number, payload)`` for every record from the checkpoint on, in order."""
        for first, path in self._scan().items():
            number = first
            for _, payload in self._records(path):
                if payload is None:
                    break
                if number >= self.checkpoint:
                    yield number, payload
                number += 1

    # --- writing ----------------------------------------------------------------------------------------------

    def append(self, payload: bytes) -> int:
        """Append one record, durably (written and fsynced before this returns); return its number."""
        record = _HEADER.pack(_MAGIC, len(payload), zlib.crc32(payload)) + payload
        with self._lock:
            handle = self._writable()
            start = handle.tell()
            try:
                handle.write(record)
                handle.flush()
                os.fsync(handle.fileno())
            except OSError as exc:
                # nothing half-written stays behind: the next append starts where this one did
                try:
                    handle.truncate(start)
                    handle.seek(start)
                except OSError:
                    pass
                raise SpoolError(f"cannot write to the spool {self.directory}: {exc.strerror or exc}", path=self.directory) from None
            number = self.next_record
            self.next_record += 1
            self.appended += 1
            if handle.tell() >= self.segment_bytes:
                handle.close()
                self._handle = None
                self._current_first = None
            return number

    def _writable(self) -> Any:
        if self._handle is None:
            if self._current_first is None:
                self._current_first = self.next_record
                self._segments[self.next_record] = self.directory / _segment_name(self.next_record)
            path = self._segments[self._current_first]
            try:
                self._handle = path.open("ab")
                _fsync_directory(self.directory)
            except OSError as exc:
                raise SpoolError(f"cannot open the spool segment {path}: {exc.strerror or exc}", path=path) from None
        return self._handle

    def advance(self, next_needed: int, stored_traces: list[str] | None = None) -> None:
        """Move the checkpoint to ``next_needed`` (every record before it is no longer needed; ``stored_traces``: the
        stored traces with spans in it or after) and delete the segments wholly before it; a checkpoint never moves
        back."""
        stored = sorted(stored_traces or [])
        with self._lock:
            if next_needed < self.checkpoint or (next_needed == self.checkpoint and stored == self.stored_traces):
                return
            path = self.directory / "checkpoint.json"
            temporary = path.with_suffix(".tmp")
            with temporary.open("w", encoding="utf-8") as handle:
                json.dump({"next_needed": next_needed, "stored_traces": stored}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
            _fsync_directory(self.directory)
            self.checkpoint, self.stored_traces = next_needed, stored
            firsts = sorted(self._segments)
            for first, following in zip(firsts, firsts[1:]):
                if following <= next_needed and first != self._current_first:
                    self._segments.pop(first).unlink(missing_ok=True)

    def stats(self) -> SpoolStats:
        """Where the spool stands (see :class:`SpoolStats`)."""
        with self._lock:
            size = sum(p.stat().st_size for p in self._segments.values() if p.exists())
            return SpoolStats(self.appended, self.next_record, self.checkpoint, size)

    def close(self) -> None:
        """Close the segment being written, and let another process have the spool."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None
            if self._lock_handle is not None:
                self._lock_handle.close()
                self._lock_handle = None

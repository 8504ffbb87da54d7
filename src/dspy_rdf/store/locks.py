"""A lock that many readers hold at once and one writer alone: the embedded store's queries run beside each other
(pyoxigraph lets go of the GIL while it evaluates one) and wait only for a fold of the ledger under way."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ReadWriteLock"]


class ReadWriteLock:
    """Shared reading, exclusive writing. Both are reentrant in their thread: a writer may read (a fold checks the
    ledger with queries) and write again, a reader may read again; a reader may not start writing (two readers doing
    so would wait for each other for ever: a RuntimeError says so). A waiting writer goes before readers that do not
    hold the lock yet, so that a steady flow of queries cannot keep a fold waiting for ever."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._readers = 0
        self._writer: int | None = None
        self._writes = 0
        self._writers_waiting = 0
        self._held = threading.local()

    def _reads_held(self) -> int:
        return int(getattr(self._held, "reads", 0))

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock for reading (beside other readers)."""
        me, held = threading.get_ident(), self._reads_held()
        with self._changed:
            if self._writer != me and not held:
                while self._writer is not None or self._writers_waiting:
                    self._changed.wait()
            self._readers += 1
        self._held.reads = held + 1
        try:
            yield
        finally:
            self._held.reads = held
            with self._changed:
                self._readers -= 1
                self._changed.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the lock alone (its own thread's reads aside)."""
        me = threading.get_ident()
        if self._writer != me and self._reads_held():
            raise RuntimeError("a thread holding the lock for reading cannot start writing")
        with self._changed:
            if self._writer != me:
                self._writers_waiting += 1
                try:
                    while self._writer is not None or self._readers:
                        self._changed.wait()
                finally:
                    self._writers_waiting -= 1
                    self._changed.notify_all()  # readers held back by this writer alone, when its wait was cut short
                self._writer = me
            self._writes += 1
        try:
            yield
        finally:
            with self._changed:
                self._writes -= 1
                if not self._writes:
                    self._writer = None
                self._changed.notify_all()

"""The embedded store's lock: queries read beside each other, a fold of the ledger writes alone."""

from __future__ import annotations

import threading

import pytest

from dspy_rdf.store.locks import ReadWriteLock

WAIT = 10  # seconds: only reached when the lock is wrong


def test_readers_hold_the_lock_at_once():
    lock = ReadWriteLock()
    both = threading.Barrier(2, timeout=WAIT)

    def read() -> None:
        with lock.reading():
            both.wait()  # broken (an error) unless the other reader holds the lock at the same time

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not both.broken


def test_a_writer_waits_for_the_readers_and_readers_wait_for_a_waiting_writer():
    lock = ReadWriteLock()
    events: list[str] = []
    reading, writer_waits = threading.Event(), threading.Event()
    release_reader = threading.Event()

    def first_reader() -> None:
        with lock.reading():
            reading.set()
            release_reader.wait(WAIT)
            events.append("first reader done")

    def writer() -> None:
        writer_waits.set()
        with lock.writing():
            events.append("writer")

    def late_reader() -> None:
        with lock.reading():
            events.append("late reader")

    threads = [threading.Thread(target=first_reader)]
    threads[0].start()
    assert reading.wait(WAIT)
    threads.append(threading.Thread(target=writer))
    threads[1].start()
    assert writer_waits.wait(WAIT)
    while not lock._writers_waiting:  # the writer is queued behind the reader
        threading.Event().wait(0.01)
    threads.append(threading.Thread(target=late_reader))
    threads[2].start()
    threads[2].join(0.2)
    assert events == []  # neither the writer nor a reader that came after it got in
    release_reader.set()
    for thread in threads:
        thread.join(WAIT)
    assert events == ["first reader done", "writer", "late reader"]


def test_the_writer_reads_and_writes_again_and_a_reader_reads_again_in_its_thread():
    lock = ReadWriteLock()
    with lock.writing(), lock.reading(), lock.writing(), lock.reading():
        pass
    with lock.reading(), lock.reading():
        pass
    done = threading.Event()

    def write() -> None:
        with lock.writing():
            done.set()

    thread = threading.Thread(target=write)
    thread.start()
    assert done.wait(WAIT)  # everything was let go
    thread.join(WAIT)


def test_a_reader_that_starts_writing_is_refused_not_left_waiting():
    lock = ReadWriteLock()
    with lock.reading(), pytest.raises(RuntimeError, match="cannot start writing"):
        with lock.writing():
            pass
    with lock.writing():  # let go of
        pass

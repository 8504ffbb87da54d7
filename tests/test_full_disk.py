"""A capture file on a full disk: each run is written whole or not at all, a run that could not be written is in the
recorder's ``errors`` and ``unwritten``, and the file stays readable up to the last whole run, on a real small file
system (tmpfs, where the test may mount one) and with writes that fail part way."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from dspy_rdf.capture.recorder import FileSink, TraceRecorder
from dspy_rdf.capture.sinks import append_whole
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces

RUNS = [item.trace for item in read_traces(Path(__file__).parent / "data" / "crosspath" / "capture.jsonl")]


def _distinct(count: int) -> list:
    """``count`` runs, each another execution (its own top-level call id)."""
    import dataclasses

    out = []
    for n in range(count):
        run = RUNS[n % len(RUNS)]
        root = dataclasses.replace(run.calls[0], dspy_call_id=f"{run.calls[0].dspy_call_id}-{n}")
        out.append(dataclasses.replace(run, calls=[root, *run.calls[1:]]))
    return out


@pytest.fixture
def small_disk(tmp_path):
    """A 96 KiB tmpfs: a real file system that fills up (needs root and mount; else skipped, saying why)."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8); the test with failing writes below still runs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    yield where
    subprocess.run(["umount", str(where)], check=False)


def _readable_runs(path: Path, tmp_path: Path) -> int:
    """How many runs ``dspy-rdf export`` reads from the file (and it must read it all without an error)."""
    out = tmp_path / f"{uuid.uuid4().hex}.nq"
    assert main(["export", str(path), "-o", str(out)]) == 0
    return len({line.rsplit(" ", 2)[-2] for line in out.read_text(encoding="utf-8").splitlines()})


@pytest.mark.parametrize("suffix", [".nq", ".jsonl"])
def test_a_full_disk_keeps_every_run_written_whole_or_in_unwritten(small_disk, tmp_path, suffix):
    path = small_disk / f"runs{suffix}"
    sink = FileSink(path)
    recorder = TraceRecorder(sink)
    runs = _distinct(30)
    for run in runs:
        sink.write(run)
    assert recorder.flush(timeout=120)
    recorder.close()
    written = _readable_runs(path, tmp_path)
    assert 0 < written < len(runs)
    assert len(recorder.unwritten) == len(runs) - written and len(recorder.errors) == len(recorder.unwritten)
    assert all("No space left on device" in line for line in recorder.errors)


class _DiskFillsUp:
    """``os.write`` that writes ``room`` bytes in all, then fails with ENOSPC part way through a write."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.write = os.write

    def __call__(self, fd: int, data) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = self.write(fd, bytes(data[: self.room]))
        self.room -= written
        return written


@pytest.mark.parametrize("suffix", [".nq", ".jsonl"])
def test_a_write_that_fails_part_way_leaves_no_half_run(tmp_path, monkeypatch, suffix):
    path = tmp_path / f"runs{suffix}"
    sink = FileSink(path, background=False)  # each run written before write returns, its failure raised there
    runs = _distinct(6)
    scratch = FileSink(tmp_path / f"scratch{suffix}", background=False)
    scratch.write(runs[0])
    room = int(2.5 * (tmp_path / f"scratch{suffix}").stat().st_size)  # room for two runs and half of a third
    monkeypatch.setattr("dspy_rdf.capture.sinks.os.write", _DiskFillsUp(room=room))
    failed = 0
    for run in runs:
        try:
            sink.write(run)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            failed += 1
    monkeypatch.undo()
    written = _readable_runs(path, tmp_path)
    assert 0 < written < len(runs) and failed == len(runs) - written
    assert path.read_bytes().endswith(b"\n")
    # the disk has room again: the next run is written after the last whole one
    sink.write(runs[-1])
    assert _readable_runs(path, tmp_path) == written + 1


def test_an_unfinished_record_left_by_a_killed_writer_is_cut_off_by_the_next_write(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b'{"whole": 1}\n{"cut off wh')
    append_whole(path, b'{"next": 2}\n')
    assert path.read_bytes() == b'{"whole": 1}\n{"next": 2}\n'

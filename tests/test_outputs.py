"""Files written whole or not at all by the library (:func:`dspy_rdf.open_output`), whatever ends the writing."""

from __future__ import annotations

import os

import pytest

from dspy_rdf import open_output


def test_a_file_is_written_whole_and_an_error_keeps_the_previous_one(tmp_path):
    out = tmp_path / "out.nq"
    with open_output(str(out)) as handle:
        handle.write(b"first\n")
    with pytest.raises(ValueError), open_output(out) as handle:
        handle.write(b"half of the second")
        raise ValueError("a trace that cannot be written")
    assert out.read_bytes() == b"first\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.nq"]


def test_a_signal_the_moment_the_temporary_file_is_made_leaves_nothing_behind(tmp_path, monkeypatch):
    made = []
    real_open = os.open

    def open_then_interrupted(file, flags, *args, **kwargs):
        fd = real_open(file, flags, *args, **kwargs)  # the file exists ...
        made.append(file)
        os.close(fd)
        raise KeyboardInterrupt  # ... and Ctrl-C arrives before the caller holds it

    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt), open_output(tmp_path / "out.nq"):
        pass
    monkeypatch.undo()
    assert made and list(tmp_path.iterdir()) == []

"""Make ``store_0_1_0.nq``: a store as dspy-rdf 0.1.0 (revision 7708838) wrote it, for the key-migration test.

    git worktree add /tmp/dspy-rdf-0.1.0 7708838
    python3 -m venv /tmp/v010 && /tmp/v010/bin/pip install -q -e "/tmp/dspy-rdf-0.1.0[test]"
    /tmp/v010/bin/python tests/data/legacy/make_legacy_store.py /tmp/dspy-rdf-0.1.0

It runs with that revision's code (its ``src`` first on the path), offline on the real ``dspy.LM`` (LiteLLM mock
responses), and writes every way the old content keys let one execution into a store twice:

- three program runs recorded by two recorders at once (a ``FileSink`` to JSON Lines and a ``StoreSink``), the JSON
  Lines then exported into the same store: each run twice, under two IRIs (each recorder stamped its own times);
- the store dumped and the dump exported into it again: every trace whose times the store rewrote
  (``+00:00`` -> ``Z``, trailing zeros of a fraction) a second time;
- the bundled history dicts of DSPy 3.3.1 and an MLflow 3 search page, as the previous release stored them.

The store is written out with ``dspy-rdf dump`` as N-Quads, this machine's paths replaced by placeholders (the graphs
keep the names the old keys gave them); the test loads it into a fresh store as it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
OLD = Path(sys.argv[1]).resolve()
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(OLD / "src"), str(REPO / "tests")]

import dspy  # noqa: E402
from traced_programs import run_programs  # noqa: E402

from dspy_rdf.capture.recorder import FileSink, StoreSink, TraceRecorder  # noqa: E402


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); from dspy_rdf.cli.main import main; sys.exit(main())",
                    str(OLD / "src"), *args], check=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store, runs, dump = Path(tmp) / "store", Path(tmp) / "runs.jsonl", Path(tmp) / "dump.nq"
        archive, stored = TraceRecorder(FileSink(runs)), TraceRecorder(StoreSink(store))
        dspy.configure(callbacks=[archive, stored])
        run_programs()
        for recorder in (archive, stored):
            recorder.close()
            assert not recorder.errors, recorder.errors
        cli("export", str(runs), "--store", str(store))
        cli("export", str(REPO / "tests/data/history_dicts_dspy3.3.1.json"), "--store", str(store))
        cli("export", str(REPO / "tests/data/mlflow/mlflow3_search_page.json"), "--store", str(store))
        cli("dump", "--store", str(store), "-o", str(dump))
        cli("export", str(dump), "--store", str(store))
        cli("dump", "--store", str(store), "-o", str(dump))
        cli("stats", "--store", str(store))
        text = dump.read_text(encoding="utf-8")
        for path, mark in ((sysconfig.get_paths()["purelib"], "<site-packages>"), (str(REPO), "<repo>"), (tmp, "<tmp>")):
            text = text.replace(path, mark)  # the graphs keep the names the old keys gave them
        (HERE / "store_0_1_0.nq").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

"""Canned queries against their texts at another revision of this repository, on one embedded store, in the same run.

    .venv/bin/python bench/bench_query_revisions.py --store DIR --baseline REV [--runs 5] QUERY [QUERY ...]
    .venv/bin/python bench/bench_query_revisions.py --lm-calls N --workdir DIR --baseline REV QUERY [QUERY ...]

``--store`` is an embedded store loaded already (the 1M LM-call store of ``bench_scale.py --keep``); ``--lm-calls``
exports ``bench_store.py``'s workload of that size into a new store under ``--workdir`` first.

For each named query, the text of ``src/dspy_rdf/analytics/queries/QUERY.rq`` at ``REV`` (``git show``) and the text
in the working tree run in turn on the store opened read-only, interleaved so that both see the same machine: the
first run of each, then ``--runs`` more. Printed as a Markdown table: rows, the baseline's first run and median of
the others (with their range), the same for the working tree, the ratio of the medians, and whether both gave the
same rows. The queries run as pyoxigraph evaluates them, without ``run_query``'s check that the ledger covers every
trace (the same for both texts).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyoxigraph as ox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import workload  # noqa: E402  (the same workload files)

REPO = Path(__file__).resolve().parent.parent
QUERIES = "src/dspy_rdf/analytics/queries"


def texts(name: str, baseline: str) -> tuple[str, str]:
    """The query's text at ``baseline`` and in the working tree."""
    path = f"{QUERIES}/{name}.rq"
    before = subprocess.run(["git", "show", f"{baseline}:{path}"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return before, (REPO / path).read_text(encoding="utf-8")


def timed_rows(store: ox.Store, text: str) -> tuple[float, list[tuple[str, ...]]]:
    start = time.perf_counter()
    solutions = store.query(text)
    assert isinstance(solutions, ox.QuerySolutions), "a canned query is a SELECT"
    rows = [tuple(str(term) for term in row) for row in solutions]
    return time.perf_counter() - start, rows


def figure(times: list[float]) -> str:
    rest = times[1:]
    return f"{times[0]:.2f}, {statistics.median(rest):.2f} ({min(rest):.2f}-{max(rest):.2f})"


def exported(lm_calls: int, workdir: Path) -> Path:
    """A new embedded store under ``workdir`` holding the workload of ``lm_calls`` LM calls."""
    from dspy_rdf.inputs import read_traces
    from dspy_rdf.store import EmbeddedStore

    workdir.mkdir(parents=True, exist_ok=True)
    path, _, _ = workload(lm_calls, workdir)
    directory = workdir / f"store_{lm_calls}"
    if directory.exists():  # written by whatever release ran before: written again by this one
        shutil.rmtree(directory)
    with EmbeddedStore(directory) as store:
        store.put(item.trace for item in read_traces(path) if item.trace is not None)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="an embedded store's directory")
    where.add_argument("--lm-calls", type=int, help="export the workload of this many LM calls into a new store first")
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"), help="where --lm-calls writes its files")
    parser.add_argument("--baseline", required=True, help="the git revision whose query texts are the baseline")
    parser.add_argument("--runs", type=int, default=5, help="runs of each text after the first")
    parser.add_argument("queries", nargs="+")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1 (the median is of the runs after the first)")
    store = ox.Store.read_only(str(args.store if args.store is not None else exported(args.lm_calls, args.workdir)))
    pairs = {name: texts(name, args.baseline) for name in args.queries}
    times: dict[tuple[str, int], list[float]] = {(name, i): [] for name in pairs for i in (0, 1)}
    rows: dict[tuple[str, int], list[tuple[str, ...]]] = {}
    for _ in range(args.runs + 1):
        for name, both in pairs.items():
            for i, text in enumerate(both):
                seconds, rows[(name, i)] = timed_rows(store, text)
                times[(name, i)].append(seconds)
    print(f"| query | rows | {args.baseline} | working tree | ratio of medians | rows |")
    print("|---|---:|---|---|---:|---|")
    for name in pairs:
        before, now = times[(name, 0)], times[(name, 1)]
        ratio = statistics.median(now[1:]) / statistics.median(before[1:]) if statistics.median(before[1:]) else float("nan")
        same = "same" if rows[(name, 0)] == rows[(name, 1)] else "DIFFERENT"
        print(f"| `{name}` | {len(rows[(name, 1)])} | {figure(before)} | {figure(now)} | {ratio:.2f} | {same} |")


if __name__ == "__main__":
    main()

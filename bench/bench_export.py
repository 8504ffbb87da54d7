"""Benchmark of ``dspy-rdf export`` as users run it: wall time and peak memory of the command, per output, per size.

    .venv/bin/python bench/bench_export.py [--lm-calls 10000 100000] [--repeat 3] [--outputs store nq ttl trig nt jsonld]
                                           [--jsonld-max 10000] [--workdir DIR] [--keep-store DIR]

Workload: the JSONL files of distinct real DSPy traces that ``bench_store.py`` writes (the same generator, cached in
``--workdir``). Every measurement is one ``python -m dspy_rdf.cli export FILE ...`` process, so its peak resident
memory (``ru_maxrss`` of that child, from ``os.wait4`` in a small launcher process) is the whole command's, imports
included:

- ``store``: into a fresh embedded store (``--store DIR``), including the compaction the command runs after a
  large export;
- ``re-export``: the same file again into that store, where every trace is already stored;
- ``nq``, ``ttl``, ``trig``, ``nt``, ``jsonld``: to a file (``-o out.EXT``); JSON-LD only up to ``--jsonld-max`` LM
  calls (rdflib compacts it, about 150 traces per second);
- baseline, in the same run: pyoxigraph's own ``bulk_load`` of the N-Quads the ``nq`` export wrote, in a process of
  its own (no JSON, no model, no per-trace anything).

Medians over ``--repeat`` runs; throughput in triples per second; the memory of the largest size against the
smallest says whether peak memory stays flat in the input size.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import workload  # noqa: E402  (the same workload files)

OUTPUTS = ("store", "re-export", "nq", "ttl", "trig", "nt", "jsonld")
RAW = "pyoxigraph bulk_load (baseline)"


# Runs the command and reports its wall time and peak RSS on stderr. A child's ``ru_maxrss`` is at least the resident
# size of the process that started it (Linux keeps the pre-exec peak, and Python starts children with vfork), so the
# benchmark, grown by reading the workload, would set a floor under every figure: this small launcher starts each one.
LAUNCHER = """
import os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stderr=subprocess.STDOUT)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status), file=sys.stderr)
"""


def run_child(command: list[str]) -> tuple[float, float, str]:
    """Run a command through the launcher; return its seconds, its own peak RSS (MB) and its last line of output."""
    with tempfile.TemporaryFile() as out:
        launcher = subprocess.run([sys.executable, "-c", LAUNCHER, *command], stdout=out, stderr=subprocess.PIPE, check=True)
        seconds, peak_kb, returncode = launcher.stderr.split()
        out.seek(0)
        text = out.read().decode("utf-8", "replace").strip()
    if int(returncode) != 0:
        raise SystemExit(f"{' '.join(command)} exited with {returncode}: {text[-500:]}")
    return float(seconds), int(peak_kb) / 1024, text.splitlines()[-1] if text else ""


def triples_of(nquads: Path) -> int:
    with nquads.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm-calls", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--outputs", nargs="+", choices=OUTPUTS, default=list(OUTPUTS))
    parser.add_argument("--jsonld-max", type=int, default=10_000, help="largest size exported to JSON-LD (LM calls)")
    parser.add_argument("--workdir", type=Path, default=None, help="where workload files go (default: a temp dir)")
    parser.add_argument("--distinct-arguments", action="store_true", help="each trace's tool arguments its own (free text)")
    parser.add_argument("--keep-store", type=Path, default=None,
                        help="keep the store of the last store export in this directory (replaced); the baseline then runs first")
    args = parser.parse_args()
    cleanup = args.workdir is None
    args.workdir = Path(tempfile.mkdtemp(prefix="bench-export-")) if cleanup else args.workdir
    args.workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="export-", dir=args.workdir))
    cli = [sys.executable, "-m", "dspy_rdf.cli", "export"]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, repeat {args.repeat}", flush=True)
    results: dict[int, dict] = {}
    try:
        for size in sorted(args.lm_calls):
            path, n_traces, n_calls = workload(size, args.workdir, distinct_arguments=args.distinct_arguments)
            print(f"\n# {n_calls:,} LM calls, {n_traces:,} traces, {path.stat().st_size / 1e6:.0f} MB of JSONL", flush=True)
            figures: dict[str, tuple[list[float], list[float]]] = {}

            def note(name: str, seconds: float, mb: float, last: str) -> None:
                times, peaks = figures.setdefault(name, ([], []))
                times.append(seconds)
                peaks.append(mb)
                print(f"  {name:<34} {seconds:8.2f} s  {mb:7.0f} MB  {last[:90]}", flush=True)

            nquads = scratch / "out.nq"
            triples = 0

            def baseline() -> None:
                nonlocal triples
                if not nquads.exists():
                    run_child([*cli, str(path), "-o", str(nquads)])
                raw = scratch / "raw"
                shutil.rmtree(raw, ignore_errors=True)
                code = (
                    "import pyoxigraph as ox, sys; s = ox.Store(sys.argv[1]); "
                    "s.bulk_load(path=sys.argv[2], format=ox.RdfFormat.N_QUADS); s.flush()"
                )
                note(RAW, *run_child([sys.executable, "-c", code, str(raw), str(nquads)]))
                shutil.rmtree(raw, ignore_errors=True)
                triples = triples_of(nquads)
                if args.keep_store:  # the store kept and the N-Quads may not fit on one disk together
                    nquads.unlink()

            for _ in range(args.repeat):
                if args.keep_store:
                    baseline()
                for output in args.outputs:
                    if output == "re-export":
                        continue
                    if output == "jsonld" and size > args.jsonld_max:
                        continue
                    if output == "store":
                        target = scratch / "store"
                        shutil.rmtree(target, ignore_errors=True)
                        note("store", *run_child([*cli, str(path), "--store", str(target)]))
                        if "re-export" in args.outputs:
                            note("re-export", *run_child([*cli, str(path), "--store", str(target)]))
                        if args.keep_store:
                            shutil.rmtree(args.keep_store, ignore_errors=True)
                            shutil.move(str(target), args.keep_store)
                        shutil.rmtree(target, ignore_errors=True)
                    else:
                        note(output, *run_child([*cli, str(path), "-o", str(scratch / f"out.{output}")]))
                if not args.keep_store:
                    baseline()
            nquads.unlink(missing_ok=True)
            results[size] = {
                "lm_calls": n_calls, "traces": n_traces, "triples": triples, "mb": path.stat().st_size / 1e6,
                "figures": {k: (statistics.median(t), statistics.median(p)) for k, (t, p) in figures.items()},
            }  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if cleanup:
            shutil.rmtree(args.workdir, ignore_errors=True)
    print()
    print(markdown(results))


def markdown(results: dict[int, dict]) -> str:
    sizes = sorted(results)
    out = ["Export, as the command runs (median): triples/s, wall seconds, peak RSS of the process\n"]
    head = " | ".join(f"{results[s]['lm_calls']:,} LM calls, {results[s]['traces']:,} traces, {results[s]['mb']:.0f} MB JSONL" for s in sizes)
    out.append(f"| output | {head} |" + (" peak RSS, largest / smallest |" if len(sizes) > 1 else ""))
    out.append("|---|" + "---:|" * len(sizes) + ("---:|" if len(sizes) > 1 else ""))
    names = [n for n in (*OUTPUTS, RAW) if any(n in results[s]["figures"] for s in sizes)]
    for name in names:
        cells = []
        for s in sizes:
            figure = results[s]["figures"].get(name)
            if figure is None:
                cells.append("—")
                continue
            seconds, mb = figure
            rate = f"{results[s]['triples'] / seconds:,.0f} t/s, " if name != "re-export" else f"{results[s]['traces'] / seconds:,.0f} traces/s, "
            cells.append(f"{rate}{seconds:.1f} s, {mb:,.0f} MB")
        ratio = ""
        if len(sizes) > 1:
            first, last = results[sizes[0]]["figures"].get(name), results[sizes[-1]]["figures"].get(name)
            ratio = f" {last[1] / first[1]:.2f}x |" if first and last else " — |"
        out.append(f"| {name} | " + " | ".join(cells) + " |" + ratio)
    for s in sizes:
        figures = results[s]["figures"]
        if "store" in figures and RAW in figures:
            out.append(f"\n{results[s]['lm_calls']:,} LM calls: export into the store takes {figures['store'][0] / figures[RAW][0]:.1f}x "
                       "the time of pyoxigraph's own bulk load of the same N-Quads.")  # fmt: skip
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())

"""Throughput of ``dspy-rdf serve`` taking OTLP spans over HTTP, against ``dspy-rdf export`` of the same spans from a file.

    python bench/bench_serve.py [--copies 400] [--rounds 3] [--workers N]

Workload: ``bench_imports.py``'s OTLP input (OpenInference's spans of three real programs, copied ``--copies`` times
with fresh ids: 6 LM calls and 3 traces per copy), grouped into export requests of about 512 spans, as the
OpenTelemetry SDK's batch processor sends them. Configurations, each into a fresh embedded store, interleaved round by
round, medians over the rounds:

- ``export``: the baseline, ``dspy-rdf export otlp.jsonl --store DIR`` in a fresh process;
- ``serve json`` / ``serve protobuf``: ``dspy-rdf serve --store DIR`` started first (not timed), then the requests
  POSTed by two concurrent senders (OTLP/JSON, or protobuf encoded beforehand); timed from the first request to the
  moment ``/status`` says every trace is stored (the server's ``--grace`` is 0.2 s, so at most 0.2 s of the figure
  is the wait for more spans of the last traces).

Peak RSS is the serving (or exporting) process's own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from bench_imports import build  # noqa: E402
from servers import free_port  # noqa: E402

DSPY_RDF = [sys.executable, "-m", "dspy_rdf"]


def requests_of(path: Path, spans_per_request: int = 512) -> list[dict]:
    """The lines of an OTLP JSON Lines file, grouped into export requests of about ``spans_per_request`` spans."""
    out: list[dict] = []
    batch: list[dict] = []
    count = 0
    for line in path.read_text().splitlines():
        export = json.loads(line)
        batch += export["resourceSpans"]
        count += sum(len(ss["spans"]) for rs in export["resourceSpans"] for ss in rs["scopeSpans"])
        if count >= spans_per_request:
            out.append({"resourceSpans": batch})
            batch, count = [], 0
    if batch:
        out.append({"resourceSpans": batch})
    return out


def protobuf(export: dict) -> bytes:
    from dspy_rdf.interop.otlp import export_request_bytes

    return export_request_bytes(export["resourceSpans"])


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_export(path: Path, store: Path) -> tuple[float, float]:
    """``dspy-rdf export FILE --store DIR`` in a fresh process: seconds, and that process's own peak RSS (a wrapper
    process reads its one child's)."""
    wrapper = (
        "import resource, subprocess, sys, time; start = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
        "print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    done = subprocess.run([sys.executable, "-c", wrapper, *DSPY_RDF, "export", str(path), "--store", str(store)], check=True, capture_output=True, text=True)
    seconds, rss = done.stdout.split()
    return float(seconds), float(rss)


def run_serve(bodies: list[bytes], content_type: str, store: Path, traces: int, workers: int | None = None) -> tuple[float, float]:
    port = free_port()
    process = subprocess.Popen(
        [*DSPY_RDF, "serve", "--store", str(store), "--port", str(port), "--grace", "0.2", *(["--workers", str(workers)] if workers is not None else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                httpx.get(f"{url}/status", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None:
                    raise RuntimeError("serve stopped") from None
                time.sleep(0.05)
        queue = list(reversed(bodies))
        lock = threading.Lock()

        def sender() -> None:
            with httpx.Client(timeout=120) as client:
                while True:
                    with lock:
                        if not queue:
                            return
                        body = queue.pop()
                    response = client.post(f"{url}/v1/traces", content=body, headers={"Content-Type": content_type})
                    response.raise_for_status()

        start = time.perf_counter()
        threads = [threading.Thread(target=sender) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # one client for the polling: a new httpx client per request costs about 20 ms of CPU (its TLS context),
        # which, every 20 ms, took most of a core from the server being measured
        with httpx.Client(timeout=30) as poller:
            while True:
                status = poller.get(f"{url}/status").json()["traces"]
                if status["written"] + status["failed"] >= traces and status["gathering"] == 0:
                    break
                time.sleep(0.02)
        seconds = time.perf_counter() - start
        if status["failed"]:
            raise RuntimeError(f"{status['failed']} trace(s) not stored")
        return seconds, peak_rss_mb(process.pid)
    finally:
        process.terminate()
        process.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, help="serve's --workers (default: serve's own)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        path = build(directory, args.copies)["otlp"]
        exports = requests_of(path)
        json_bodies = [json.dumps(e).encode() for e in exports]
        proto_bodies = [protobuf(e) for e in exports]
        traces, lm_calls = 3 * args.copies, 6 * args.copies
        spans = sum(len(ss["spans"]) for e in exports for rs in e["resourceSpans"] for ss in rs["scopeSpans"])
        print(f"{args.copies} copies: {traces} traces, {lm_calls} LM calls, {spans} spans in {len(exports)} requests; "
              f"file {path.stat().st_size / 1e6:.1f} MB")  # fmt: skip
        results: dict[str, list[tuple[float, float]]] = {"export": [], "serve json": [], "serve protobuf": []}
        for round_number in range(args.rounds):
            for name in results:
                store = directory / f"store-{name.replace(' ', '-')}-{round_number}"
                if name == "export":
                    results[name].append(run_export(path, store))
                elif name == "serve json":
                    results[name].append(run_serve(json_bodies, "application/json", store, traces, args.workers))
                else:
                    results[name].append(run_serve(proto_bodies, "application/x-protobuf", store, traces, args.workers))
        baseline = statistics.median(s for s, _ in results["export"])
        print("| path | seconds (median) | range | LM calls/s | time x export | peak RSS MB |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, runs in results.items():
            seconds = [s for s, _ in runs]
            median = statistics.median(seconds)
            rss = statistics.median(r for _, r in runs)
            print(f"| {name} | {median:.2f} | {min(seconds):.2f}-{max(seconds):.2f} | {lm_calls / median:,.0f} | "
                  f"{median / baseline:.2f} | {rss:.0f} |")  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    main()

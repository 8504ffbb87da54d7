"""Benchmark of redaction on text made to defeat it: time must grow linearly with the text.

    python bench/bench_redact.py [--repeat 5] [--sizes 30000 300000 3000000]

Each workload is one string of the given size, redacted with the default redactor (``Redactor.redact_text``, what
every export and message uses), median of ``--repeat`` runs. Workloads: repeated PEM private-key headers with no end
(each header once searched to the end of the text), repeated JSON pairs of a secret field with no closing quote,
repeated ``key='`` reprs, a long run of backslashes before a JSON pair, and plain prose (the baseline: what text with
nothing to redact costs). The last column is the time of each size over the time of the size before it, divided by
the ratio of the sizes: about 1 when the time is linear, about 10 for each step of 10 when it is quadratic.
"""

from __future__ import annotations

import argparse
import statistics
import time

from dspy_rdf.canonical.redact import DEFAULT_REDACTOR

WORKLOADS = {
    "PEM headers without an end": "-----BEGIN RSA PRIVATE KEY-----\n",
    'secret JSON pairs without a closing quote: "api_key": "': '"api_key": "x',
    "reprs key='": "password='",
    "prose (baseline)": "The model answered the question and called a tool. ",
}


def _text(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def median_seconds(text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        DEFAULT_REDACTOR.redact_text(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000, 300_000, 3_000_000])
    args = parser.parse_args()
    print(f"{'workload':<60} {'size':>10} {'seconds':>10} {'µs/KB':>8} {'growth':>7}")
    workloads = {**WORKLOADS, "backslashes before a JSON pair": None}
    for name, unit in workloads.items():
        previous: tuple[int, float] | None = None
        for size in args.sizes:
            text = "\\" * size + '"k": "v"' if unit is None else _text(unit, size)
            seconds = median_seconds(text, args.repeat)
            growth = "" if previous is None else f"{(seconds / previous[1]) / (size / previous[0]):.2f}"
            print(f"{name:<60} {size:>10,} {seconds:>10.4f} {seconds / size * 1e9:>8.1f} {growth:>7}")
            previous = (size, seconds)


if __name__ == "__main__":
    main()

"""Benchmark of the model -> RDF mapping, against its baselines, measured in one run.

    python bench/bench_mapping.py [--repeat 5]

Workload: the bundled real DSPy 3.3.1 traces (src/dspy_rdf/examples/dspy33_traces.jsonl), repeated.
Measured, each as the median of --repeat runs, in triples per second:

- dspy-rdf: canonical model -> N-Quads text (trace_lines), including trace keys (SHA-256 of canonical JSON).
- plain-text floor: the same quads, already split into term strings, formatted as N-Quads lines with an f-string.
- rdflib Graph.add: adding the same triples as rdflib terms to an in-memory Graph.
- linkml-runtime rdflib_dumper: the same traces as gen-pydantic objects, dumped with linkml-runtime's generic dumper.
  It cannot serialize Any-valued dicts, so this comparison uses the traces without JSON values on both sides.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pyoxigraph as ox  # noqa: E402
import rdflib  # noqa: E402

from dspy_rdf.cli.demo import bundled_traces_path  # noqa: E402
from dspy_rdf.inputs import read_traces  # noqa: E402
from dspy_rdf.rdf.writer import trace_lines  # noqa: E402


def median_rate(fn, triples: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return triples / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--copies", type=int, default=300, help="how many times the bundled set is repeated")
    args = parser.parse_args()

    base = [item.trace for item in read_traces(bundled_traces_path())]
    traces = base * args.copies
    lines = [line for t in traces for line in trace_lines(t)[1]]
    triples = len(lines)
    quads = [(q.subject, q.predicate, q.object, q.graph_name) for q in ox.parse("".join(lines).encode(), ox.RdfFormat.N_QUADS)]
    terms = [(str(s), str(p), str(o), str(g)) for s, p, o, g in quads]
    rdflib_triples = [tuple(_rdflib(t) for t in (s, p, o)) for s, p, o, _ in quads]

    ours = median_rate(lambda: "".join(line for t in traces for line in trace_lines(t)[1]), triples, args.repeat)
    floor = median_rate(lambda: "".join([f"{s} {p} {o} {g} .\n" for s, p, o, g in terms]), triples, args.repeat)

    def graph_add():
        g = rdflib.Graph()
        for triple in rdflib_triples:
            g.add(triple)

    rdflib_rate = median_rate(graph_add, triples, args.repeat)

    # linkml-runtime's rdflib_dumper on Any-free traces (see tests/test_oracle.py for the object conversion).
    import test_oracle
    from linkml.generators.pydanticgen import PydanticGenerator
    from linkml_runtime import SchemaView
    from linkml_runtime.dumpers import rdflib_dumper

    from dspy_rdf.canonical.identity import trace_iri
    from dspy_rdf.resources import schema_path

    module = types.ModuleType("dspy_generated")
    exec(PydanticGenerator(str(schema_path())).serialize(), module.__dict__)  # noqa: S102
    view = SchemaView(str(schema_path()))
    plain = [t for t in base if not test_oracle._has_json_values(t)] * max(1, args.copies // 10)
    objects = [test_oracle._as_linkml(t, module, id=trace_iri(t)) for t in plain]
    plain_triples = sum(len(trace_lines(t)[1]) for t in plain)
    ours_plain = median_rate(lambda: "".join(line for t in plain for line in trace_lines(t)[1]), plain_triples, args.repeat)
    linkml_rate = median_rate(
        lambda: [rdflib_dumper.as_rdf_graph(o, schemaview=view, prefix_map={"urn": "urn:"}) for o in objects],
        plain_triples,
        max(1, args.repeat // 2),
    )

    print(f"workload: {len(traces)} traces, {triples} triples (Any-free subset: {len(plain)} traces, {plain_triples} triples)")
    print(f"dspy-rdf model -> N-Quads          {ours:12,.0f} triples/s")
    print(f"plain-text N-Quads floor           {floor:12,.0f} triples/s   dspy-rdf is {floor / ours:.2f}x slower than the floor")
    print(f"rdflib Graph.add                   {rdflib_rate:12,.0f} triples/s   dspy-rdf is {ours / rdflib_rate:.1f}x faster")
    print(f"dspy-rdf, Any-free subset          {ours_plain:12,.0f} triples/s")
    print(f"linkml-runtime rdflib_dumper       {linkml_rate:12,.0f} triples/s   dspy-rdf is {ours_plain / linkml_rate:.0f}x faster")


def _rdflib(term):
    if isinstance(term, ox.NamedNode):
        return rdflib.URIRef(term.value)
    return rdflib.Literal(term.value, datatype=None if term.datatype.value.endswith("#string") else rdflib.URIRef(term.datatype.value))


if __name__ == "__main__":
    main()

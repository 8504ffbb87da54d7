"""N-Quads have no order: a dump shuffled, sorted otherwise, interleaved or merged gives the traces the dump holds,
once each; a line that is not valid costs its own graph only, and nothing is stored in part."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import DATA

from dspy_rdf.cli.demo import bundled_traces_path
from dspy_rdf.cli.main import main
from dspy_rdf.inputs import read_traces
from dspy_rdf.rdf.quadfiles import MAX_BAD_LINES

SOURCES = [DATA / "crosspath" / "capture.jsonl", bundled_traces_path()]


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    """A store's dump: the traces of a live capture and the bundled examples, every trace's quads together."""
    directory = tmp_path_factory.mktemp("dump")
    store, out = directory / "store", directory / "dump.nq"
    assert main(["export", *map(str, SOURCES), "--store", str(store)]) == 0
    assert main(["dump", "--store", str(store), "-o", str(out)]) == 0
    return out


def graph_of(line: str) -> str:
    return line.rsplit(" ", 2)[-2]


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def exported(path: Path, tmp_path: Path) -> tuple[int, list[str]]:
    """The exit code of ``path`` exported into a new store, and the sorted lines of that store's dump."""
    store, out = tmp_path / f"store-{path.stem}", tmp_path / f"out-{path.stem}.nq"
    code = main(["export", str(path), "--store", str(store)])
    assert main(["dump", "--store", str(store), "-o", str(out)]) == 0
    return code, sorted(lines_of(out))


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_dump_holds_several_traces_each_spread_over_many_lines(dump):
    graphs = [graph_of(line) for line in lines_of(dump)]
    assert len(set(graphs)) >= 6 and len(graphs) > 20 * len(set(graphs))


@pytest.mark.parametrize("order", ["shuffled", "reversed", "interleaved", "sorted by subject"])
def test_any_order_of_a_dump_gives_its_traces_once_each(dump, tmp_path, capsys, order):
    lines = lines_of(dump)
    if order == "shuffled":
        random.Random(7).shuffle(lines)
    elif order == "reversed":
        lines.reverse()
    elif order == "interleaved":  # the graphs' lines taken in turn, as a merge of per-graph streams gives them
        by_graph: dict[str, list[str]] = {}
        for line in lines:
            by_graph.setdefault(graph_of(line), []).append(line)
        columns = list(by_graph.values())
        lines = [c[i] for i in range(max(map(len, columns))) for c in columns if i < len(c)]
    else:
        lines.sort()
    moved = write(tmp_path / "moved.nq", lines)
    code, got = exported(moved, tmp_path)
    assert code == 0 and "left out" not in capsys.readouterr().err
    _, want = exported(dump, tmp_path)
    assert got == want


def test_two_dumps_of_one_store_merged_give_each_trace_once(dump, tmp_path, capsys):
    merged = write(tmp_path / "merged.nq", [*lines_of(dump), *lines_of(dump)])
    shuffled = lines_of(merged)
    random.Random(3).shuffle(shuffled)
    for path in (merged, write(tmp_path / "merged_shuffled.nq", shuffled)):
        items = list(read_traces(path))
        assert all(i.error is None for i in items), [str(i.error) for i in items if i.error]
        assert len(items) == len({graph_of(line) for line in lines_of(dump)})
    assert capsys.readouterr().err == ""


def test_quads_that_change_a_trace_read_whole_before_them_are_named_and_left_out(dump, tmp_path):
    lines = lines_of(dump)
    graph = graph_of(lines[0])
    text = next(line for line in lines if graph_of(line) == graph and "/dspy/text>" in line)
    changed = text.replace('"', '"changed ', 1)
    items = list(read_traces(write(tmp_path / "changed.nq", [*lines, changed])))
    errors = [str(i.error) for i in items if i.error is not None]
    assert len(errors) == 1 and f"graph {graph}: quads further on in the file change its trace" in errors[0]
    read = [i.trace for i in items if i.trace is not None]
    assert len(read) == len({graph_of(line) for line in lines}) and "changed " not in repr(read)


def test_a_line_that_is_not_valid_costs_only_the_graph_around_it(dump, tmp_path):
    lines = lines_of(dump)
    graphs = list(dict.fromkeys(graph_of(line) for line in lines))
    # one bad line between two graphs (the graph just before it is whole and kept), one inside the third graph
    boundary = max(i for i, line in enumerate(lines) if graph_of(line) == graphs[0]) + 1
    inside = [i for i, line in enumerate(lines) if graph_of(line) == graphs[2]][5]
    broken = [*lines[:boundary], "<http://a> <http://b> not-a-term <http://g> .", *lines[boundary:inside], "garbage",
              *lines[inside + 1:]]  # fmt: skip
    items = list(read_traces(write(tmp_path / "broken.nq", broken)))
    errors = [(i.line, str(i.error)) for i in items if i.error is not None]
    assert [line for line, _ in errors[:2]] == [boundary + 1, inside + 2]
    assert all(f"broken.nq:{line}: not valid nq" in message for line, message in errors[:2])
    assert len(errors) == 3 and f"graph {graphs[2]}: next to a line that is not valid" in errors[2][1]
    read = [i.trace for i in items if i.trace is not None]
    assert len(read) == len(graphs) - 1  # every graph but the one the garbage line cut
    assert main(["export", str(tmp_path / "broken.nq"), "--store", str(tmp_path / "st")]) == 1


def test_a_syntax_error_in_trig_keeps_the_graph_before_it(dump, tmp_path):
    trig = tmp_path / "dump.trig"
    assert main(["export", str(dump), "-o", str(trig)]) == 0
    text = trig.read_text(encoding="utf-8")
    second = text.index("\n<", text.index("{") + 1)  # the second graph starts on a line of its own
    cut = text.index("{", second)
    write(tmp_path / "broken.trig", [text[:cut] + "{ garbage"])
    items = list(read_traces(tmp_path / "broken.trig"))
    assert [i.trace is not None for i in items] == [True, False] and "not valid trig" in str(items[1].error)


def test_reading_stops_after_many_lines_that_are_not_valid(tmp_path):
    items = list(read_traces(write(tmp_path / "garbage.nq", ["garbage"] * (MAX_BAD_LINES * 3))))
    assert len(items) == MAX_BAD_LINES + 1 and "reading stopped here" in str(items[-1].error)
    assert items[-2].line == MAX_BAD_LINES


def test_the_second_pass_sorts_graphs_into_many_small_files_and_gives_the_same_traces(dump, tmp_path, monkeypatch):
    from dspy_rdf.rdf import quadfiles

    lines = lines_of(dump)
    random.Random(11).shuffle(lines)
    shuffled = write(tmp_path / "shuffled.nq", lines)
    one_file = sorted(str(i.trace.content_digest) for i in read_traces(shuffled))
    monkeypatch.setattr(quadfiles, "_BUCKET_BYTES", 4096)  # a file for every graph or two
    opened = []
    real_open = Path.open
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: opened.append(self) or real_open(self, *a, **k))
    many_files = sorted(str(i.trace.content_digest) for i in read_traces(shuffled))
    assert many_files == one_file and len(one_file) == len({graph_of(line) for line in lines})
    assert len([p for p in opened if p.suffix == ".nq" and p != shuffled]) == len(one_file)


def _reordered(value, rng: random.Random):
    """A JSON value with the keys of every object in a random order (JSON-LD does not mind; streaming parsers do)."""
    if isinstance(value, list):
        return [_reordered(v, rng) for v in value]
    if not isinstance(value, dict):
        return value
    keys = list(value)
    rng.shuffle(keys)
    return {k: _reordered(value[k], rng) for k in keys}


def test_json_ld_is_written_in_the_streaming_order_and_read_in_any_order(dump, tmp_path):
    import json

    written = tmp_path / "dump.jsonld"
    assert main(["export", str(dump), "-o", str(written)]) == 0
    document = json.loads(written.read_text(encoding="utf-8"))
    assert list(document) == ["@context", "@graph"]
    for graph in document["@graph"]:
        assert list(graph) == ["id", "@graph"]
        assert all(list(node)[: len({"@type", "id"} & set(node))] == [k for k in ("@type", "id") if k in node] for node in graph["@graph"])
    want = sorted(str(i.trace.content_digest) for i in read_traces(dump))
    assert sorted(str(i.trace.content_digest) for i in read_traces(written)) == want
    shuffled = _reordered(document, random.Random(5))
    shuffled = {"@graph": shuffled["@graph"], "@context": shuffled["@context"]}  # the context last, too
    other = tmp_path / "other.jsonld"
    other.write_text(json.dumps(shuffled), encoding="utf-8")
    items = list(read_traces(other))
    assert all(i.error is None for i in items) and sorted(str(i.trace.content_digest) for i in items) == want


@pytest.mark.parametrize("kind", ["grouped nq", "shuffled nq", "jsonld", "jsonld in another order"])
def test_progress_counts_every_byte_once(dump, tmp_path, kind):
    import json

    path = dump
    if kind == "shuffled nq":
        lines = lines_of(dump)
        random.Random(2).shuffle(lines)
        path = write(tmp_path / "s.nq", lines)
    elif kind.startswith("jsonld"):
        path = tmp_path / "d.jsonld"
        assert main(["export", str(dump), "-o", str(path)]) == 0
        if kind == "jsonld in another order":
            document = json.loads(path.read_text(encoding="utf-8"))
            path.write_text(json.dumps({"@graph": document["@graph"], "@context": document["@context"]}), encoding="utf-8")
    seen: list[int] = []
    items = list(read_traces(path, progress=seen.append))
    assert all(i.error is None for i in items) and len(items) == len({graph_of(line) for line in lines_of(dump)})
    assert sum(seen) == path.stat().st_size and all(n > 0 for n in seen)


def test_json_ld_out_of_the_streaming_order_late_in_the_file_gives_each_trace_once(dump, tmp_path):
    import json

    path = tmp_path / "d.jsonld"
    assert main(["export", str(dump), "-o", str(path)]) == 0
    document = json.loads(path.read_text(encoding="utf-8"))
    last = document["@graph"][-1]
    last["@graph"] = [{**{k: v for k, v in node.items() if k != "@type"}, "@type": node["@type"]} for node in last["@graph"]]
    path.write_text(json.dumps(document), encoding="utf-8")
    items = list(read_traces(path))
    assert all(i.error is None for i in items), [str(i.error) for i in items if i.error]
    assert sorted(str(i.trace.content_digest) for i in items) == sorted(str(i.trace.content_digest) for i in read_traces(dump))

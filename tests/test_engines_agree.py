"""The two engines read literals as XSD does, and agree: generated lexical forms of every number and boolean datatype
the shapes use, put into a trace file as written, give the same results from the fast engine and the pySHACL engine,
and a datatype violation exactly when XSD's grammar (written here from the XSD 1.1 specification) refuses the form."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from conftest import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspy_rdf.cli.main import main as cli_main
from dspy_rdf.validation import Engine, validate_files

XSD = "http://www.w3.org/2001/XMLSchema#"
# XSD 1.1 Part 2, 3.3.3 decimal, 3.4.13 integer, 3.3.2 boolean: the lexical spaces, ASCII digits only, no spaces
GRAMMAR = {
    "integer": re.compile(r"[+-]?[0-9]+"),
    "decimal": re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)"),
    "boolean": re.compile(r"true|false|1|0"),
}
SLOT = {"integer": "input_tokens", "decimal": "cost", "boolean": "cache_hit"}
"""A slot of each datatype in the fixture below (its usage, its response)."""

# What Python's int() and Decimal() take that XSD does not, what XSD takes that looks odd, and plain noise
LENIENT = ["1_000", " 12", "12 ", "\u0661\u0662", "+5", "-0", "00", "1e3", "NaN", "Infinity", "-inf", ".5", "5.", "+.5", "1.", "TRUE", "True", "yes", " true", "0x1F", "", "\u00b2"]
lexical_forms = st.one_of(
    st.sampled_from(LENIENT),
    st.from_regex(re.compile(r"[+-]?[0-9_ .eE]{0,6}", re.ASCII), fullmatch=True),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters='"\\\n\r'), max_size=5),
)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> str:
    """The N-Quads of a trace with a usage, a cost and a cache flag, as export writes them."""
    out = tmp_path_factory.mktemp("agree") / "entry.nq"
    assert cli_main(["export", str(DATA / "history_entry_all_parts.json"), "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _results(path: Path, engine: Engine) -> set[tuple[str, str | None, str]]:
    report = validate_files([path], engine=engine, redactor=None)
    assert report.validated == 1
    return {(x.focus_node, x.path, x.constraint) for x in report.violations}


@pytest.mark.parametrize("datatype", sorted(GRAMMAR))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(form=lexical_forms)
def test_both_engines_read_a_literal_as_xsd_does(written, datatype, form):
    slot = SLOT[datatype]
    pattern = re.compile(rf'(<https://w3id.org/lmodel/dspy/{slot}> )"[^"]*"(\^\^<{re.escape(XSD + datatype)}>)')
    assert len(pattern.findall(written)) == 1
    text = pattern.sub(lambda m: f'{m.group(1)}"{form}"{m.group(2)}', written)
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "edited.nq"
        path.write_text(text, encoding="utf-8")
        fast, reference = _results(path, Engine.FAST), _results(path, Engine.PYSHACL)
    assert fast == reference, (form, fast ^ reference)
    datatype_violation = any(constraint == "DatatypeConstraintComponent" and path_ == f"dspy:{slot}" for _, path_, constraint in fast)
    assert datatype_violation == (GRAMMAR[datatype].fullmatch(form) is None), (form, fast)


def _plain_pyshacl(path: Path) -> set[tuple[str, str | None, str]]:
    """pySHACL with the shipped shapes on the file's one graph as rdflib parses it, every literal as written: no store
    in between."""
    import rdflib

    from dspy_rdf.validation.reference import validate_graph_pyshacl
    from dspy_rdf.validation.shapes import load_shapes

    dataset = rdflib.Dataset()
    normalize, rdflib.NORMALIZE_LITERALS = rdflib.NORMALIZE_LITERALS, False  # rdflib's parser too rewrites "00" as "0"
    try:
        dataset.parse(path, format="nquads")
    finally:
        rdflib.NORMALIZE_LITERALS = normalize
    [graph] = [g for g in dataset.graphs() if len(g)]
    found = validate_graph_pyshacl(iter(graph), trace=str(graph.identifier), shapes=load_shapes(None))
    return {(x.focus_node, x.path, x.constraint) for x in found}


AS_WRITTEN = {
    # a datatype SHACL's sh:datatype tells apart and a store makes xsd:integer
    "nonNegativeInteger": (r'(/lm_call_count> )"(\d+)"\^\^<http://www.w3.org/2001/XMLSchema#integer>', r'\1"\2"^^<http://www.w3.org/2001/XMLSchema#nonNegativeInteger>'),
    "int": (r'(/input_tokens> )"(\d+)"\^\^<http://www.w3.org/2001/XMLSchema#integer>', r'\1"\2"^^<http://www.w3.org/2001/XMLSchema#int>'),
    # equal values in other lexical forms, which a store writes in its canonical form
    "leading zeros": (r'(/position> )"(\d+)"(\^\^<http://www.w3.org/2001/XMLSchema#integer>)', r'\1"0\2"\3'),
    "boolean 0": (r'(/cache_hit> )"false"', r'\1"0"'),
    "dateTimeStamp": (r'(/timestamp> )"([^"]+)"\^\^<http://www.w3.org/2001/XMLSchema#dateTime>', r'\1"\2"^^<http://www.w3.org/2001/XMLSchema#dateTimeStamp>'),
}


@pytest.mark.parametrize("edit", sorted(AS_WRITTEN))
def test_a_file_is_validated_as_written_not_as_a_store_keeps_it(written, tmp_path, edit):
    """Both engines report on a file what pySHACL reports on the file itself, though a store would keep other forms."""
    pattern, replacement = AS_WRITTEN[edit]
    text, count = re.subn(pattern, replacement, written)
    assert count >= 1, edit
    path = tmp_path / "edited.nq"
    path.write_text(text, encoding="utf-8")
    plain = _plain_pyshacl(path)
    assert _results(path, Engine.FAST) == _results(path, Engine.PYSHACL) == plain, edit
    if edit in ("nonNegativeInteger", "int", "dateTimeStamp"):
        assert any(constraint == "DatatypeConstraintComponent" for _, _, constraint in plain), plain


def test_positions_equal_in_value_but_not_in_form_are_as_the_file_writes_them(written, tmp_path):
    """Two items at positions "0" and "00": one value, two terms; the file is judged as pySHACL judges it."""
    lines = written.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if '/position> "1"^^' in line)
    lines[first] = lines[first].replace('"1"^^', '"00"^^')
    path = tmp_path / "positions.nq"
    path.write_text("".join(lines), encoding="utf-8")
    assert _results(path, Engine.FAST) == _results(path, Engine.PYSHACL) == _plain_pyshacl(path)

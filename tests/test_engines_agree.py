"""The two engines read literals as XSD does, and agree: generated lexical forms of every number, boolean, date and
dateTime datatype the shapes use, put into a trace file as written, give the same results from the fast engine and the
pySHACL engine, and a datatype violation exactly when XSD's grammar (written here from the XSD 1.1 specification)
refuses the form; start and end times are ordered as XSD orders them, whatever their precision, year or zone."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from conftest import DATA, examples
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
@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


# XSD 1.1 Part 2, 3.3.7 dateTime and 3.3.9 date, written here from the specification: years of four digits or more
# (no leading zero beyond four, a sign for years before 1 BCE, year 0 allowed), days within their month (proleptic
# Gregorian leap years), 24:00:00 as the end of a day, seconds below 60 with any number of fraction digits, zones from
# -14:00 to +14:00
_YEAR_FORM = r"-?([1-9][0-9]{3,}|0[0-9]{3})"
_ZONE_FORM = r"(Z|[+-]((0[0-9]|1[0-3]):[0-5][0-9]|14:00))?"
DATE_TIME_FORM = re.compile(
    _YEAR_FORM + r"-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})T(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?|24:00:00(\.0+)?)" + _ZONE_FORM
)
DATE_FORM = re.compile(_YEAR_FORM + r"-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})" + _ZONE_FORM)


def _xsd_valid(form: str, grammar: re.Pattern[str]) -> bool:
    match = grammar.fullmatch(form)
    if match is None:
        return False
    year, month, day = int(form[: match.start("m") - 1]), int(match["m"]), int(match["d"])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= month <= 12 and 1 <= day <= [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]


def _year_text(year: int, padded: bool) -> str:
    return ("-" if year < 0 else "") + (f"{abs(year):04d}" if padded else str(abs(year)))


_years = st.one_of(st.integers(1900, 2100), st.sampled_from([0, 1, 9999, 10000, -1, -4, 2000, 2100, 10**11, 10**15]), st.integers(-20000, 200000))
_zones = st.sampled_from(["", "Z", "+00:00", "-00:00", "+01:00", "-05:30", "+14:00", "-14:00", "+14:01", "+15:00", "z", "+0100"])
_fractions = st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=22).map(lambda digits: "." + digits), st.just("."))


@st.composite
def date_time_forms(draw) -> str:
    """dateTime forms around XSD's edges: every field a little outside its range now and then, long fractions,
    large and negative years, odd zones, and a few forms Python's parsers take that XSD does not."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([
            "2026-01-01 00:00:00Z", "20260101T000000Z", "2026-01-01T00:00Z", "2026-01-01t00:00:00Z", "+2026-01-01T00:00:00Z",
            "02026-01-01T00:00:00Z", "2026-01-01T00:00:00Z ", "\u0662026-01-01T00:00:00Z", "2026-W01-1T00:00:00Z", "",
        ]))  # fmt: skip
    year = draw(_years)
    return (
        f"{_year_text(year, draw(st.sampled_from([True, True, True, False])))}-{draw(st.integers(0, 13)):02d}-{draw(st.integers(0, 32)):02d}"
        f"T{draw(st.integers(0, 25)):02d}:{draw(st.sampled_from([0, 0, 30, 59, 60])):02d}:{draw(st.sampled_from([0, 1, 59, 60])):02d}"
        f"{draw(_fractions)}{draw(_zones)}"
    )


@pytest.fixture(scope="module")
def run_written(tmp_path_factory) -> str:
    """The N-Quads of one recorded program run (its calls have started_at and ended_at), as export writes them."""
    out = tmp_path_factory.mktemp("agree") / "run.nq"
    assert cli_main(["export", str(DATA / "crosspath" / "capture.jsonl"), "-o", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    first_graph = lines[0].rsplit(" ", 2)[-2]
    return "".join(line for line in lines if line.rstrip().endswith(f"{first_graph} ."))


def _with_times(written: str, start: str, end: str) -> str:
    """``written`` with the first call's started_at and ended_at replaced (the call whose started_at comes first)."""
    lines = written.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "/started_at> " in line)
    subject = lines[first].split(" ", 1)[0]
    last = next(i for i, line in enumerate(lines) if line.startswith(subject + " ") and "/ended_at> " in line)
    for index, form in ((first, start), (last, end)):
        lines[index] = re.sub(r'"[^"]*"(\^\^<[^>]*>)', lambda m: f'"{form}"{m.group(1)}', lines[index])
    return "".join(lines)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=date_time_forms(), end=date_time_forms())
def test_both_engines_read_and_order_date_times_as_xsd_does(run_written, start, end):
    """Start and end times of a call around XSD's edges (nanoseconds, years past 9999 or before 1, a zone on one side
    only, 24:00:00): the engines agree, and report a datatype violation exactly when XSD's grammar refuses the form."""
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "edited.nq"
        path.write_text(_with_times(run_written, start, end), encoding="utf-8")
        fast, reference = _results(path, Engine.FAST), _results(path, Engine.PYSHACL)
    assert fast == reference, (start, end, fast ^ reference)
    for slot, form in (("started_at", start), ("ended_at", end)):
        reported = any(constraint == "DatatypeConstraintComponent" and path_ == f"dspy:{slot}" for _, path_, constraint in fast)
        assert reported == (not _xsd_valid(form, DATE_TIME_FORM)), (slot, form, fast)


PAIRS = {
    "one nanosecond before its start": ("2026-01-01T00:00:00.000000001Z", "2026-01-01T00:00:00Z", True),
    "the same instant in two zones": ("2026-01-01T01:00:00+01:00", "2026-01-01T00:00:00Z", False),
    "no zone, 14 hours after": ("2026-01-01T14:00:00", "2026-01-01T00:00:00Z", False),
    "no zone, more than 14 hours after": ("2026-01-01T14:00:01", "2026-01-01T00:00:00Z", True),
    "no zone, two days after": ("2026-01-03T00:00:00", "2026-01-01T00:00:00Z", True),
    "after year 9999": ("10000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", True),
    "before year 1": ("-0001-01-01T00:00:00Z", "-0002-01-01T00:00:00Z", True),
    "year 0 before year 1": ("0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", False),
    "beyond the store's fraction digits": ("2026-01-01T00:00:00.0000000000000000002Z", "2026-01-01T00:00:00.0000000000000000001Z", True),
    "beyond the store's years": ("999999999999999-01-01T00:00:00Z", "2026-01-01T00:00:00Z", True),
}


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_a_call_ending_before_it_starts_is_found_by_xsd_order(run_written, tmp_path, case):
    start, end, violation = PAIRS[case]
    path = tmp_path / "edited.nq"
    path.write_text(_with_times(run_written, start, end), encoding="utf-8")
    fast, reference = _results(path, Engine.FAST), _results(path, Engine.PYSHACL)
    assert fast == reference, fast ^ reference
    assert not any(constraint == "DatatypeConstraintComponent" for _, _, constraint in fast), fast
    assert any(path_ == "dspy:ended_at" for _, path_, _ in fast) == violation, fast


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(form=date_time_forms().map(lambda form: form.split("T", 1)[0] + (form[-1] if form.endswith("Z") else "")))
def test_both_engines_read_a_date_as_xsd_does(written, form):
    pattern = re.compile(rf'(<https://w3id.org/lmodel/dspy/summary_day> )"[^"]*"(\^\^<{re.escape(XSD + "date")}>)')
    assert len(pattern.findall(written)) == 1
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "edited.nq"
        path.write_text(pattern.sub(lambda m: f'{m.group(1)}"{form}"{m.group(2)}', written), encoding="utf-8")
        fast, reference = _results(path, Engine.FAST), _results(path, Engine.PYSHACL)
    assert fast == reference, (form, fast ^ reference)
    reported = any(constraint == "DatatypeConstraintComponent" and path_ == "dspy:summary_day" for _, path_, constraint in fast)
    assert reported == (not _xsd_valid(form, DATE_FORM)), (form, fast)


_close_forms = st.builds(
    "{}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}{}{}".format,
    st.sampled_from(["2025", "2026", "0000", "-0001", "10000"]), st.sampled_from([1, 12]), st.sampled_from([1, 2, 31]),
    st.sampled_from([0, 9, 10, 13, 14, 23]), st.sampled_from([0, 59]), st.sampled_from([0, 1, 59]), _fractions.filter(lambda f: f != "."),
    st.sampled_from(["", "", "Z", "+14:00", "-14:00", "+01:00"]),
)
"""Valid dateTimes close to each other (within a day or so, around the year's turn), where a zone on one side only
makes XSD's order indeterminate."""


@settings(max_examples=examples(400), deadline=None)
@given(first=st.one_of(date_time_forms(), _close_forms), second=st.one_of(date_time_forms(), _close_forms))
def test_the_pyshacl_engines_date_time_order_is_the_stores(first, second):
    """The exact values and XSD order given to rdflib compare two dateTimes as Oxigraph's SPARQL does (<, >, =; an
    indeterminate comparison holds in neither direction), wherever the store can read both."""
    import pyoxigraph as ox

    from dspy_rdf.validation.xsd import xsd_reading

    readings = [xsd_reading(form, XSD + "dateTime") for form in (first, second)]
    query = (
        f'SELECT (?a < ?b AS ?lt) (?a > ?b AS ?gt) (?a = ?b AS ?eq) (<{XSD}dateTime>(?a) = ?a AS ?a_ok) (<{XSD}dateTime>(?b) = ?b AS ?b_ok) WHERE {{'
        f' BIND({ox.Literal(first, datatype=ox.NamedNode(XSD + "dateTime"))} AS ?a) BIND({ox.Literal(second, datatype=ox.NamedNode(XSD + "dateTime"))} AS ?b) }}'
    )
    [row] = list(ox.Store().query(query))
    if row["a_ok"] is None or row["b_ok"] is None:  # beyond the store (the fast engine leaves these to pySHACL) or invalid
        return
    assert all(reading is not None and reading[0] for reading in readings), (first, second)
    a, b = readings[0][1], readings[1][1]  # type: ignore[index]
    for name, holds in (("lt", a < b), ("gt", a > b), ("eq", a == b)):
        assert holds == (row[name] is not None and row[name].value == "true"), (first, second, name)

"""The LinkML schema: it reproduces the seed page for LMToolCallPart, documents everything, agrees with the
Python model, and the generated artifacts are up to date."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from linkml_runtime import SchemaView

from dspy_rdf.canonical import model
from dspy_rdf.generate import generate_all
from dspy_rdf.resources import schema_path


@pytest.fixture(scope="module")
def view() -> SchemaView:
    return SchemaView(str(schema_path()))


def test_the_schema_has_the_required_identity(view):
    schema = view.schema
    assert schema.id == "https://w3id.org/lmodel/dspy" and schema.name == "dspy" and schema.default_prefix == "dspy"
    assert view.namespaces()["dspy"] == "https://w3id.org/lmodel/dspy/"
    assert set(view.all_subsets()) == {"lm_contract", "tooling", "derived"}
    assert list(view.get_enum("LMPartType").permissible_values) == list(model.PART_TYPES)


def test_every_source_format_is_in_the_schema_the_model_and_the_registry(view):
    from dspy_rdf.sources import SOURCES

    assert list(view.get_enum("TraceSourceFormat").permissible_values) == list(model.SOURCE_FORMATS)
    assert sorted(source.format for source in SOURCES) == sorted(set(model.SOURCE_FORMATS) - {"dspy_callback"})
    assert all(source.written_kinds <= set(model.SOURCE_KINDS) for source in SOURCES)


# (slot, range, required, description, domain_of) exactly as on the seed page for LMToolCallPart.
SEED_SLOTS = {
    "call_id": ("Identifier", None, "Provider-issued tool call id (mapped to ``id`` on the Pydantic model).", ["ToolCall", "ToolResult", "LMToolCallPart", "LMToolResultPart"]),
    "args": ("Any", None, "JSON-schema dict describing tool argument shapes.", ["Tool", "ToolCall", "LMToolCallPart"]),
    "provider_data": ("Any", None, "Provider-specific raw payload preserved with a normalized object.", ["ToolResult", "LMToolCallPart", "LMToolResultPart", "LMToolSpec", "LMOutput", "LMResponse"]),
    "name": ("string", True, "Name of the tool to call.", ["NamedThing", "LMToolCallPart", "LMMessage", "LMToolSpec"]),
    "metadata": ("Any", None, "Opaque key/value metadata passed alongside an object.", ["ToolResult", "Citation", "LMPart", "LMMessage", "LMToolSpec", "LMRequest", "LMUsage", "LMOutput", "LMResponse"]),
    "part_type": ("string", True, "Discriminator for the LMPart subclass. One of the ``LMPartType`` permissible values.", ["LMPart"]),
}


def test_lm_tool_call_part_reproduces_the_seed_page(view):
    cls = view.get_class("LMToolCallPart")
    assert cls.is_a == "LMPart"
    assert cls.description == "Model-issued request to call a tool (``LMToolCallPart``)."
    assert cls.in_subset == ["lm_contract", "tooling"]
    assert cls.close_mappings == ["mcp:CallToolRequest"]
    assert view.expand_curie("mcp:CallToolRequest").endswith("#CallToolRequest")
    assert cls.slots == ["call_id", "args", "provider_data", "name"]
    induced = {s.name: s for s in view.class_induced_slots("LMToolCallPart")}
    for name, (rng, required, description, domain_of) in SEED_SLOTS.items():
        slot = induced[name]
        assert (slot.range, slot.required, slot.description, slot.domain_of) == (rng, required, description, domain_of), name
        assert not slot.multivalued
    assert induced["name"].slot_uri == "rdfs:label"
    assert (induced["part_type"].ifabsent, induced["part_type"].equals_string) == ("string(tool_call)", "tool_call")
    # The one addition to the seed: the foundation issue asks for an explicit, queryable order of parts.
    assert set(induced) - set(SEED_SLOTS) == {"position"}
    assert view.get_class("ToolCalls").slots == ["tool_calls"] and view.get_slot("tool_calls").range == "LMToolCallPart"
    assert view.get_class("Any").class_uri == "linkml:Any"


def test_every_class_slot_enum_and_type_has_a_description(view):
    missing = [name for name, element in {**view.all_classes(imports=False), **view.all_slots(imports=False), **view.all_enums(imports=False), **view.all_types(imports=False)}.items() if not element.description]
    assert missing == []


def test_every_part_kind_has_its_fixed_part_type(view):
    for kind, cls in model.PART_CLASSES.items():
        slot = view.induced_slot("part_type", cls.__name__)
        assert (slot.equals_string, slot.ifabsent) == (kind, f"string({kind})")


def _field_is_list(tp) -> bool:
    return typing.get_origin(tp) is list


# PartRef is not a class of the schema: it is how the model points at a part, and the mapping writes it as that part's IRI.
MODEL_CLASSES = [c for c in vars(model).values() if dataclasses.is_dataclass(c) and c is not model.PartRef]


def test_every_schema_class_has_a_model_class(view):
    abstract_or_mixin = {name for name, c in view.all_classes(imports=False).items() if c.abstract or c.mixin}
    # Classes of the subset `derived` are written by the writer from the model, like derived slots.
    derived = {name for name, c in view.all_classes(imports=False).items() if "derived" in (c.in_subset or [])}
    assert derived == {"UsageSummary"}
    assert set(view.all_classes(imports=False)) - abstract_or_mixin - derived - {"Any"} == {c.__name__ for c in MODEL_CLASSES}


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_the_python_model_agrees_with_the_schema(view, cls):
    hints = typing.get_type_hints(cls)
    # The content digest a trace was stored with is derived, and read back so that a reader can check it.
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "content_digest"}
    # Derived facts (subset `derived`) are computed by the writer, not held by the model.
    slots = {s.name: s for s in view.class_induced_slots(cls.__name__) if "derived" not in (s.in_subset or [])}
    # Identity and order live in the mapping layer: `id` is the node IRI, `position` the list index.
    tag = {"part_type"} if hasattr(cls, "part_type") else set()
    assert set(fields) | tag == set(slots) - {"id", "position"}
    for name, slot in slots.items():
        if name in ("id", "position", "part_type"):
            continue
        field = fields[name]
        has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        if slot.ifabsent:  # required with a schema default: the Python default is that value
            assert slot.ifabsent == f"string({field.default})", f"{cls.__name__}.{name} default"
        else:
            assert bool(slot.required) == (not has_default), f"{cls.__name__}.{name} required"
        assert bool(slot.multivalued) == _field_is_list(hints[name]), f"{cls.__name__}.{name} multivalued"


def test_generated_artifacts_are_up_to_date():
    stale = generate_all(check=True)
    assert stale == [], f"run `python -m dspy_rdf.generate`: stale {stale}"


def test_the_decimal_slots_are_those_of_range_decimal(view):
    from dspy_rdf.rdf.vocab import DECIMAL_SLOTS

    assert set(DECIMAL_SLOTS) == {name for name, slot in view.all_slots().items() if slot.range == "decimal"}


def test_the_schema_tables_are_what_linkml_reads_in_the_schema(view):
    from dspy_rdf.canonical.schema_tables import CLASS_SLOTS, DERIVED_SLOTS, SLOT_URIS

    assert CLASS_SLOTS["LMToolCallPart"] == set(view.class_slots("LMToolCallPart"))
    assert CLASS_SLOTS["Trace"] == set(view.class_slots("Trace")) - {"id"}
    assert "LMPart" not in CLASS_SLOTS and "Call" not in CLASS_SLOTS  # abstract: nothing is typed with them alone
    assert SLOT_URIS == {"name": "http://www.w3.org/2000/01/rdf-schema#label", "description": "http://purl.org/dc/terms/description"}
    assert {"lm_call_count", "tool_name", "subtree_cost"} <= DERIVED_SLOTS and "input_tokens" not in DERIVED_SLOTS


def test_a_new_slot_reaches_the_schema_tables_by_regeneration(tmp_path, monkeypatch):
    """A slot added to the schema alone makes the tables stale, and regenerating them adds it."""
    import dspy_rdf.generate as generate

    schema = tmp_path / "schema" / "dspy.yaml"
    schema.parent.mkdir()
    text = schema_path().read_text(encoding="utf-8")
    assert "\n  finish_reason:\n" in text
    schema.write_text(text.replace("\n  finish_reason:\n", "\n  stop_sequence_hit:\n    description: Which stop sequence ended the output.\n    range: string\n  finish_reason:\n", 1), encoding="utf-8")
    schema_text = schema.read_text(encoding="utf-8")
    schema.write_text(schema_text.replace("      - finish_reason\n", "      - finish_reason\n      - stop_sequence_hit\n", 1), encoding="utf-8")
    tables = generate._schema_tables(schema)
    assert '"stop_sequence_hit"' in tables and tables != generate._schema_tables(schema_path())
    namespace: dict = {}
    exec(compile(tables, "schema_tables.py", "exec"), namespace)
    assert "stop_sequence_hit" in namespace["CLASS_SLOTS"]["LMOutput"]


def test_dspy33_keys_are_the_fields_of_dspy_core_types():
    """The keys the DSPy 3.3 source accepts are derived from the schema; they are exactly the fields of DSPy's own
    classes (fields DSPy excludes from its JSON left out)."""
    from conftest import dspy33_types
    from dspy_rdf.sources import dspy33

    types = dspy33_types()

    def fields(cls) -> set[str]:
        return {name for name, info in cls.model_fields.items() if not info.exclude}

    assert dspy33._MESSAGE_KEYS == fields(types.LMMessage)
    assert dspy33._TOOL_KEYS == fields(types.LMToolSpec)
    assert dspy33._CONFIG_KEYS == fields(types.LMConfig)
    assert dspy33._REQUEST_KEYS == fields(types.LMRequest)
    assert dspy33._OUTPUT_KEYS == fields(types.LMOutput)
    assert dspy33._RESPONSE_KEYS == fields(types.LMResponse)
    assert dspy33.ENTRY_FIELDS == fields(types.LMHistoryEntry)
    for kind, keys in dspy33._PART_KEYS.items():
        dspy_class = getattr(types, model.PART_CLASSES[kind].__name__)
        assert keys == fields(dspy_class), kind

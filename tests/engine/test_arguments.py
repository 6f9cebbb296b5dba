"""Tool-call arguments against schemas (engine/arguments.py) and the on_schema_error policies."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toolscope_agent.engine.arguments import (
    ArgumentError,
    ToolArgumentsError,
    apply_schema_error_policy,
    coerce_arguments,
    validate_arguments,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "maxLength": 20, "pattern": r"^[\w./-]+$"},
        "offset": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number", "exclusiveMaximum": 1},
        "recursive": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "label": {"type": ["string", "null"]},
        "options": {"type": "object", "properties": {"depth": {"type": "integer", "maximum": 5}},
                    "additionalProperties": False},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def messages(errors: list[ArgumentError]) -> list[str]:
    return [str(error) for error in errors]


def test_valid_arguments_have_no_errors():
    assert validate_arguments(SCHEMA, {"path": "src/a.py", "offset": 3, "ratio": 0.5, "recursive": True,
                                       "mode": "fast", "tags": ["x"], "label": None,
                                       "options": {"depth": 2}}) == []
    assert validate_arguments(SCHEMA, {"path": "a", "offset": 5.0}) == []  # an integral float is an integer


@pytest.mark.parametrize(("arguments", "expected"), [
    ({}, ["path: is required"]),
    ({"path": ""}, ["path: must be at least 1 character long", r"path: must match the pattern ^[\w./-]+$"]),
    ({"path": "a" * 21}, ["path: must be at most 20 characters long"]),
    ({"path": "a b"}, [r"path: must match the pattern ^[\w./-]+$"]),
    ({"path": "a", "offset": "5"}, ["offset: expected integer, got string"]),
    ({"path": "a", "offset": True}, ["offset: expected integer, got boolean"]),
    ({"path": "a", "offset": 1.5}, ["offset: expected integer, got number"]),
    ({"path": "a", "offset": -1}, ["offset: must be at least 0"]),
    ({"path": "a", "ratio": 1}, ["ratio: must be less than 1"]),
    ({"path": "a", "mode": "medium"}, ['mode: must be one of: "fast", "slow"']),
    ({"path": "a", "tags": []}, ["tags: must have at least 1 item"]),
    ({"path": "a", "tags": ["a", 2, "c", "d"]}, ["tags: must have at most 3 items",
                                                 "tags[1]: expected string, got integer"]),
    ({"path": "a", "label": 3}, ["label: expected string or null, got integer"]),
    ({"path": "a", "options": {"depth": 9, "x": 1}}, ["options.depth: must be at most 5",
                                                       "options.x: is not a known property"]),
    ({"path": "a", "extra": 1}, ["extra: is not a known property"]),
    ("not an object", ["arguments: expected object, got string"]),
])
def test_each_violation_is_reported_at_its_path(arguments, expected):
    assert messages(validate_arguments(SCHEMA, arguments)) == expected


def test_const_any_of_one_of_all_of_and_positional_items():
    assert messages(validate_arguments({"const": 1}, True)) == ["arguments: must be 1"]
    assert validate_arguments({"const": 1}, 1.0) == []
    any_of = {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]}
    assert validate_arguments(any_of, "ab") == [] and validate_arguments(any_of, 4) == []
    assert messages(validate_arguments(any_of, "abc")) == [
        "arguments: matches none of the allowed forms (first: arguments: expected integer, got string)"]
    one_of = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert messages(validate_arguments(one_of, 3)) == ["arguments: matches more than one of the allowed forms"]
    assert validate_arguments(one_of, 3.5) == []
    all_of = {"allOf": [{"minimum": 2}, {"maximum": 4}]}
    assert messages(validate_arguments(all_of, 5)) == ["arguments: must be at most 4"]
    pair = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
    assert messages(validate_arguments(pair, ["a", "b", None])) == ["[1]: expected integer, got string"]


def test_unsupported_keywords_and_odd_schemas_reject_nothing():
    assert validate_arguments({"type": "string", "format": "email", "$ref": "#/x"}, "nope") == []
    assert validate_arguments({"type": "string", "pattern": "(["}, "x") == []
    assert validate_arguments(True, 1) == [] and validate_arguments(None, 1) == []
    assert validate_arguments({"type": "mystery"}, 1) == []
    assert messages(validate_arguments({"properties": {"x": False}}, {"x": 1})) == ["x: no value is allowed here"]
    assert validate_arguments({"minimum": 0, "exclusiveMinimum": True}, 0) != []  # draft 4 boolean form


def test_return_error_keeps_the_call_from_running_and_names_the_fields():
    outcome = apply_schema_error_policy(SCHEMA, {"offset": "x", "mode": "medium"}, "return_error", tool_name="read")
    assert not outcome.ok and outcome.arguments == {"offset": "x", "mode": "medium"}
    assert [error.path for error in outcome.errors] == ["path", "offset", "mode"]
    assert outcome.message_for_model is not None
    assert outcome.message_for_model.startswith("Invalid arguments for read: path: is required; offset:")
    assert "call it again" in outcome.message_for_model


def test_valid_arguments_pass_under_every_policy():
    for policy in ("return_error", "raise", "coerce"):
        outcome = apply_schema_error_policy(SCHEMA, {"path": "a"}, policy)
        assert outcome.ok and outcome.arguments == {"path": "a"} and outcome.message_for_model is None


def test_raise_raises_with_every_error():
    with pytest.raises(ToolArgumentsError) as raised:
        apply_schema_error_policy(SCHEMA, {"offset": -2}, "raise")
    assert [error.path for error in raised.value.errors] == ["path", "offset"]
    assert "path: is required" in str(raised.value)
    with pytest.raises(ValueError, match="unknown schema error policy"):
        apply_schema_error_policy(SCHEMA, {}, "ignore")


def test_coerce_repairs_what_is_unambiguous_and_runs_the_call():
    arguments = {"path": 12, "offset": "5", "ratio": "0.25", "recursive": "TRUE", "mode": "Fast",
                 "tags": "solo", "options": '{"depth": "3", "junk": 1}', "unknown": 1}
    before = copy.deepcopy(arguments)
    outcome = apply_schema_error_policy(SCHEMA, arguments, "coerce")
    assert outcome.ok, outcome.errors
    assert outcome.arguments == {"path": "12", "offset": 5, "ratio": 0.25, "recursive": True, "mode": "fast",
                                 "tags": ["solo"], "options": {"depth": 3}}
    assert outcome.coerced == ["path", "offset", "ratio", "recursive", "mode", "tags", "options",
                               "options.depth", "options.junk", "unknown"]
    assert arguments == before  # never mutated


def test_coerce_falls_back_to_return_error_with_the_errors_left():
    outcome = apply_schema_error_policy(SCHEMA, {"path": "a", "offset": "five", "extra": 1}, "coerce")
    assert not outcome.ok
    assert messages(outcome.errors) == ["offset: expected integer, got string"]
    assert outcome.arguments == {"path": "a", "offset": "five", "extra": 1}
    assert outcome.message_for_model and "offset" in outcome.message_for_model


@pytest.mark.parametrize(("schema", "value", "expected"), [
    ({"type": "integer"}, "-7", -7),
    ({"type": "integer"}, "5.0", 5),
    ({"type": "integer"}, "123456789012345678901234567890", 123456789012345678901234567890),
    ({"type": "number"}, "1e3", 1000.0),
    ({"type": "number"}, "nan", "nan"),
    ({"type": "number"}, "12", 12),
    ({"type": "boolean"}, "false", False),
    ({"type": "boolean"}, "no", "no"),
    ({"type": "string"}, 2.5, "2.5"),
    ({"type": "string"}, True, True),
    ({"type": "array"}, "[1, 2]", [1, 2]),
    ({"type": "array"}, None, None),
    ({"type": "array", "items": {"type": "integer"}}, "4", [4]),
    ({"type": ["integer", "null"]}, "4", 4),
    ({"enum": ["A", "a"]}, "A", "A"),
    ({"type": "string", "enum": ["Alpha", "ALPHA"]}, "alpha", "alpha"),  # ambiguous: left alone
])
def test_coerce_conversions(schema, value, expected):
    assert coerce_arguments(schema, value) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=json_values)
def test_validation_and_coercion_never_fail_and_a_coerced_success_validates(arguments):
    validate_arguments(SCHEMA, arguments)
    outcome = apply_schema_error_policy(SCHEMA, arguments, "coerce")
    if outcome.ok:
        assert validate_arguments(SCHEMA, outcome.arguments) == []
    else:
        assert outcome.errors and outcome.message_for_model


def test_refs_into_defs_as_pydantic_writes_them_are_followed():
    """MCP servers built on pydantic (FastMCP) describe nested models with `$defs` and `$ref`;
    jsonschema follows them, and the errors keep the model-facing wording."""
    from pydantic import BaseModel

    class Address(BaseModel):
        city: str
        zip_code: int

    class Shipment(BaseModel):
        origin: Address
        stops: list[Address]

    schema = Shipment.model_json_schema()
    assert "$defs" in schema and schema["properties"]["origin"] == {"$ref": "#/$defs/Address"}
    bad = {"origin": {"city": 7, "zip_code": 1000}, "stops": [{"city": "Lyon"}]}
    assert messages(validate_arguments(schema, bad)) == [  # missing fields first
        "stops[0].zip_code: is required", "origin.city: expected string, got integer"]
    assert validate_arguments(schema, {"origin": {"city": "Paris", "zip_code": 75001}, "stops": []}) == []


def test_a_real_mcp_servers_ref_schema_is_followed():
    """mcp-server-time's convert_time result schema (bench/mcp_catalogs/time.json, as the server
    listed it) names its parts by `$ref`."""
    catalog = json.loads((Path(__file__).resolve().parents[2] / "bench" / "mcp_catalogs" / "time.json").read_text())
    schema = next(tool["outputSchema"] for tool in catalog["tools"] if tool["name"] == "convert_time")
    part = {"timezone": "UTC", "datetime": "2026-11-26T09:00:00Z", "day_of_week": "Thursday", "is_dst": False}
    assert validate_arguments(schema, {"source": part, "target": part, "time_difference": "+0.0h"}) == []
    assert messages(validate_arguments(schema, {"source": {**part, "is_dst": "no"}, "target": part,
                                                "time_difference": "+0.0h"})) == [
        "source.is_dst: expected boolean, got string"]

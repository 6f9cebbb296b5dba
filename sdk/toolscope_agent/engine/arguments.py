"""Checking a model's tool-call arguments against the tool's schema, and what to do when they fail.

Models send arguments that violate the schema they were given ("5" for an integer, one string
for an array, an invented property). A tool's `on_schema_error` setting says what happens:

- "return_error": do not run the tool; answer the model with an error naming each bad field, so
  it can correct itself on the next turn (the default: cheap, and the model usually recovers);
- "raise": raise ToolArgumentsError and let the agent's own error handling decide;
- "coerce": repair what is unambiguous (see `coerce_arguments`), validate again, and run the tool
  if the repair worked; otherwise behave as "return_error".

Validation is JSON Schema's, by the `jsonschema` package: every keyword of the schema's draft
(2020-12 unless `$schema` names another), `$ref` into `$defs`/`definitions` as pydantic-built MCP
servers emit them, formats not checked. Its errors are reworded for the model, one per bad field
("count: expected integer, got string"). A schema that cannot be used (an unresolvable `$ref`)
rejects nothing; `true` accepts anything, `false` nothing.

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SCHEMA_ERROR_POLICIES: tuple[str, ...] = ("return_error", "raise", "coerce")
MAX_ERRORS_SHOWN = 10
_MAX_DEPTH = 32
_INTEGER = re.compile(r"[+-]?\d+(?:\.0*)?")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class ArgumentError:
    """One violation: `path` locates the value ("" is the arguments object itself)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or 'arguments'}: {self.message}"


class ToolArgumentsError(ValueError):
    """Raised under the "raise" policy; `errors` lists every violation."""

    def __init__(self, message: str, errors: Sequence[ArgumentError]) -> None:
        super().__init__(message)
        self.errors = list(errors)


@dataclass(frozen=True)
class ArgumentsOutcome:
    """What to do with a call: run it with `arguments` when `ok`, else send `message_for_model`.

    `coerced` lists the paths "coerce" repaired (empty under the other policies).
    """

    ok: bool
    arguments: dict[str, Any]
    errors: list[ArgumentError]
    message_for_model: str | None
    coerced: list[str] = field(default_factory=list)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _is_type(value: Any, kind: str) -> bool:
    actual = _type_name(value)
    if kind == "number":
        return actual in ("integer", "number")
    if kind == "integer":
        return actual == "integer" or (actual == "number" and math.isfinite(value) and float(value).is_integer())
    return actual == kind or kind not in ("string", "boolean", "null", "object", "array")


def _types(schema: Mapping[str, Any]) -> list[str] | None:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and kind:
        return [k for k in kind if isinstance(k, str)] or None
    return None


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: true is not 1, 1 is 1.0, arrays and objects compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def validate_arguments(input_schema: Any, arguments: Any) -> list[ArgumentError]:
    """Every violation of `input_schema` by `arguments` (jsonschema), worded for the model; []
    when valid, or when the schema itself cannot be used (a broken one never blocks a call)."""
    if input_schema is True or not isinstance(input_schema, Mapping | bool):
        return []
    validator = _validator(input_schema)
    try:
        found = list(validator.iter_errors(arguments))
    except Exception:  # an unresolvable $ref, a broken pattern, an unknown type: the schema's fault
        return []
    worded = [(error.validator == "required", argument_error) for error in found for argument_error in _worded(error)]
    # As a person reads them: missing fields first, then outer values before what they contain.
    worded.sort(key=lambda pair: (not pair[0], _depth(pair[1].path)))
    errors = [argument_error for _, argument_error in worded]
    typed = {error.path for error in errors if error.message.startswith("expected ")}
    # A value of the wrong type gets that one error, not every check its type could not pass.
    return [error for error in errors if error.path not in typed or error.message.startswith("expected ")
            ][:MAX_ERRORS_KEPT]


MAX_ERRORS_KEPT = 100
_VALIDATORS: dict[int, tuple[Any, Any]] = {}


def _validator(schema: Mapping[str, Any] | bool) -> Any:
    """A jsonschema validator for `schema`, kept per schema object: the draft its `$schema` names,
    else draft 2020-12 (draft 7 for the older positional `items: [...]` form). Formats are not
    checked (a model's "2026-13-01" is the tool's business)."""
    entry = _VALIDATORS.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    from jsonschema import Draft4Validator, Draft7Validator, Draft202012Validator, validators

    default: Any = Draft202012Validator
    if isinstance(schema, Mapping) and isinstance(schema.get("items"), list):
        default = Draft7Validator
    if _draft4_bounds(schema):
        default = Draft4Validator
    validator = validators.validator_for(schema, default=default)(_no_false(schema))
    if len(_VALIDATORS) >= 2048:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _draft4_bounds(schema: Any, depth: int = 0) -> bool:
    """Whether the schema writes exclusiveMinimum/Maximum as draft 4 did (booleans)."""
    if not isinstance(schema, Mapping) or depth > 8:
        return False
    if isinstance(schema.get("exclusiveMinimum"), bool) or isinstance(schema.get("exclusiveMaximum"), bool):
        return True
    children = list((schema.get("properties") or {}).values()) if isinstance(schema.get("properties"), Mapping) else []
    if isinstance(schema.get("items"), Mapping):
        children.append(schema["items"])
    return any(_draft4_bounds(child, depth + 1) for child in children)


def _path(parts: Any) -> str:
    path = ""
    for part in parts:
        path = f"{path}[{part}]" if isinstance(part, int) else _child(path, str(part))
    return path


def _worded(error: Any) -> list[ArgumentError]:
    """One jsonschema error in toolscope's words (the ones a model reads), one per bad field."""
    path, value, keyword, bound = _path(error.absolute_path), error.instance, error.validator, error.validator_value
    if keyword == "not" and bound == {}:  # a `false` subschema (see _validator)
        return [ArgumentError(path, "no value is allowed here")]
    if keyword == "type":
        kinds = [bound] if isinstance(bound, str) else list(bound)
        return [ArgumentError(path, f"expected {' or '.join(kinds)}, got {_type_name(value)}")]
    if keyword == "required":
        return [ArgumentError(_child(path, name), "is required") for name in error.message.split("'")[1:2]]
    if keyword == "additionalProperties" and bound is False:
        known = set((error.schema or {}).get("properties", {}))
        patterns = [re.compile(p) for p in (error.schema or {}).get("patternProperties", {})]
        return [ArgumentError(_child(path, str(name)), "is not a known property") for name in value
                if name not in known and not any(p.search(str(name)) for p in patterns)]
    if keyword in ("anyOf", "oneOf") and error.context is not None and not _passes(error):
        first = next((worded for sub in sorted(error.context, key=lambda e: e.relative_schema_path[0])
                      for worded in _worded(sub)), None)
        detail = f" (first: {first})" if first else ""
        return [ArgumentError(path, f"matches none of the allowed forms{detail}")]
    if keyword == "oneOf":
        return [ArgumentError(path, "matches more than one of the allowed forms")]
    message = _MESSAGES.get(keyword)
    if message is not None:
        return [ArgumentError(path, message(bound))]
    return [ArgumentError(path, error.message)]


def _depth(path: str) -> int:
    return 0 if not path else path.count(".") + path.count("[") + 1


def _no_false(schema: Any, depth: int = 0) -> Any:
    """`schema` with each `false` subschema written {"not": {}}: jsonschema reports the latter at
    the value's path (the former loses which property it was)."""
    if depth > _MAX_DEPTH:
        return schema
    if schema is False and depth:
        return {"not": {}}
    if isinstance(schema, Mapping):  # additionalProperties: false is worded on its own
        return {key: value if key in _CLOSING and value is False else _no_false(value, depth + 1)
                for key, value in schema.items()}
    if isinstance(schema, list):
        return [_no_false(item, depth + 1) for item in schema]
    return schema


_CLOSING = ("additionalProperties", "unevaluatedProperties", "additionalItems")


def _passes(error: Any) -> bool:
    """Whether some branch of a oneOf passed (its error is then "more than one matched")."""
    failed = {sub.relative_schema_path[0] for sub in error.context if sub.relative_schema_path}
    return len(failed) < len(error.validator_value)


_MESSAGES: dict[str, Any] = {
    "const": lambda bound: f"must be {_literal(bound)}",
    "enum": lambda bound: "must be one of: " + ", ".join(_literal(option) for option in bound),
    "minLength": lambda bound: f"must be at least {_count(bound, 'character')} long",
    "maxLength": lambda bound: f"must be at most {_count(bound, 'character')} long",
    "pattern": lambda bound: f"must match the pattern {bound}",
    "minimum": lambda bound: f"must be at least {bound:g}",
    "maximum": lambda bound: f"must be at most {bound:g}",
    "exclusiveMinimum": lambda bound: f"must be greater than {bound:g}",
    "exclusiveMaximum": lambda bound: f"must be less than {bound:g}",
    "minItems": lambda bound: f"must have at least {_count(bound, 'item')}",
    "maxItems": lambda bound: f"must have at most {_count(bound, 'item')}",
}


def _count(number: float, noun: str) -> str:
    return f"{number:g} {noun}" + ("" if number == 1 else "s")


def error_message(errors: Sequence[ArgumentError], tool_name: str | None = None) -> str:
    """The tool result the model reads instead of the tool's output: every bad field, by path."""
    subject = f"arguments for {tool_name}" if tool_name else "arguments"
    shown = "; ".join(str(error) for error in errors[:MAX_ERRORS_SHOWN])
    more = f"; and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
    return f"Invalid {subject}: {shown}{more}. The tool did not run; fix these fields and call it again."


def apply_schema_error_policy(input_schema: Any, arguments: Any, policy: str, *,
                              tool_name: str | None = None) -> ArgumentsOutcome:
    """Validate a call's arguments and apply the tool's `on_schema_error` policy.

    Valid arguments pass unchanged under every policy. Under "coerce", a repaired call runs with
    the repaired arguments; an unrepairable one reports the errors that remain after repair,
    with the original arguments. Raises ValueError for an unknown policy, ToolArgumentsError
    under "raise".
    """
    if policy not in SCHEMA_ERROR_POLICIES:
        raise ValueError(f"unknown schema error policy {policy!r}; allowed: {', '.join(SCHEMA_ERROR_POLICIES)}")
    original = dict(arguments) if isinstance(arguments, Mapping) else {}
    errors = validate_arguments(input_schema, arguments)
    if not errors:
        return ArgumentsOutcome(True, original, [], None)
    coerced: list[str] = []
    if policy == "coerce":
        repaired = coerce_arguments(input_schema, arguments, coerced)
        errors = validate_arguments(input_schema, repaired)
        if not errors and isinstance(repaired, Mapping):
            return ArgumentsOutcome(True, dict(repaired), [], None, coerced)
    message = error_message(errors, tool_name)
    if policy == "raise":
        raise ToolArgumentsError(message, errors)
    return ArgumentsOutcome(False, original, errors, message, coerced)


def coerce_arguments(input_schema: Any, arguments: Any, changed: list[str] | None = None) -> Any:
    """`arguments` with the unambiguous repairs applied (the input is never mutated).

    Repairs, only where the value does not already have a type the schema allows: "5" -> 5 and
    "5.0" -> 5 (integer), "2.5" -> 2.5 (number), "true"/"false" -> booleans, numbers -> strings,
    a JSON string holding an array or object -> that array or object, a single value -> [value]
    for arrays; a string equal to one enum member but for case -> that member; properties the
    schema forbids (additionalProperties false) are dropped. Paths repaired are appended to
    `changed`.
    """
    return _coerce(input_schema, arguments, "", changed if changed is not None else [], 0)


def _coerce(schema: Any, value: Any, path: str, changed: list[str], depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return value
    types = _types(schema)
    if types is not None and not any(_is_type(value, kind) for kind in types):
        for kind in types:
            converted, ok = _convert(value, kind)
            if ok:
                changed.append(path or "arguments")
                value = converted
                break
    enum = schema.get("enum")
    if isinstance(enum, list) and isinstance(value, str) and not any(_json_equal(value, o) for o in enum):
        matches = [option for option in enum if isinstance(option, str) and option.lower() == value.lower()]
        if len(matches) == 1:
            changed.append(path or "arguments")
            value = matches[0]
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), Mapping):
        value = [_coerce(schema["items"], item, f"{path}[{i}]", changed, depth + 1) for i, item in enumerate(value)]
    elif isinstance(value, Mapping):
        value = _coerce_object(schema, value, path, changed, depth)
    return value


def _coerce_object(schema: Mapping[str, Any], value: Mapping[str, Any], path: str, changed: list[str],
                   depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    closed = schema.get("additionalProperties") is False
    result: dict[str, Any] = {}
    for name, item in value.items():
        if name in properties:
            result[name] = _coerce(properties[name], item, _child(path, name), changed, depth + 1)
        elif closed:
            changed.append(_child(path, str(name)))
        else:
            result[name] = item
    return result


def _convert(value: Any, kind: str) -> tuple[Any, bool]:
    """(converted value, True) when `value` has one obvious reading as `kind`, else (value, False)."""
    if kind in ("array", "object") and isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if _is_type(parsed, kind):
            return parsed, True
    if isinstance(value, str):
        text = value.strip()
        if kind == "integer" and _INTEGER.fullmatch(text):
            return int(text.split(".")[0]), True  # exact even beyond a float's 53 bits
        if kind == "number" and _NUMBER.fullmatch(text):
            if _INTEGER.fullmatch(text) and "." not in text:
                return int(text), True
            number = float(text)
            return number, math.isfinite(number)
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true", True
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return json.dumps(value), True
    if kind == "array" and value is not None and not isinstance(value, list | tuple):
        return [value], True
    return value, False

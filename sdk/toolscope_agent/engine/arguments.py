"""Checking a model's tool-call arguments against the tool's schema, and what to do when they fail.

Models send arguments that violate the schema they were given ("5" for an integer, one string
for an array, an invented property). A tool's `on_schema_error` setting says what happens:

- "return_error": do not run the tool; answer the model with an error naming each bad field, so
  it can correct itself on the next turn (the default: cheap, and the model usually recovers);
- "raise": raise ToolArgumentsError and let the agent's own error handling decide;
- "coerce": repair what is unambiguous (see `coerce_arguments`), validate again, and run the tool
  if the repair worked; otherwise behave as "return_error".

Validation covers a pragmatic JSON Schema subset, the keywords tool schemas actually use:
type (string, number, integer - an integral float like 5.0 counts - boolean, null, object,
array, or a list of these), enum, const, required, properties, additionalProperties (false or
a schema), items (one schema, or a list for positional items), minItems/maxItems,
minLength/maxLength (code points), minimum/maximum, exclusiveMinimum/exclusiveMaximum (numbers,
or draft-4 booleans), pattern (Python `re.search`), and anyOf/oneOf/allOf. Everything else
($ref, format, multipleOf, uniqueItems, patternProperties, dependencies, if/then/else, not) is
ignored, so an unsupported keyword never rejects a call. A schema that is not an object (or is
`true`) accepts anything; `false` accepts nothing. Booleans are never numbers, as in JSON.

Pure: the standard library only, no I/O.
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
_PATTERNS: dict[str, re.Pattern[str] | None] = {}
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


def _pattern(source: str) -> re.Pattern[str] | None:
    if source not in _PATTERNS:
        if len(_PATTERNS) >= 1024:
            _PATTERNS.clear()
        try:
            _PATTERNS[source] = re.compile(source)
        except (re.error, OverflowError, RecursionError):
            _PATTERNS[source] = None  # a schema's broken pattern rejects nothing
    return _PATTERNS[source]


def validate_arguments(input_schema: Any, arguments: Any) -> list[ArgumentError]:
    """Every violation of `input_schema` by `arguments`, in schema order; [] when valid."""
    errors: list[ArgumentError] = []
    _validate(input_schema, arguments, "", errors, 0)
    return errors


def _validate(schema: Any, value: Any, path: str, errors: list[ArgumentError], depth: int) -> None:
    if schema is False:
        errors.append(ArgumentError(path, "no value is allowed here"))
        return
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return
    types = _types(schema)
    if types is not None and not any(_is_type(value, kind) for kind in types):
        errors.append(ArgumentError(path, f"expected {' or '.join(types)}, got {_type_name(value)}"))
        return
    if "const" in schema and not _json_equal(value, schema["const"]):
        errors.append(ArgumentError(path, f"must be {_literal(schema['const'])}"))
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_json_equal(value, option) for option in enum):
        errors.append(ArgumentError(path, "must be one of: " + ", ".join(_literal(option) for option in enum)))
    if isinstance(value, str):
        _check_string(schema, value, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, path, errors)
    elif isinstance(value, list | tuple):
        _check_array(schema, value, path, errors, depth)
    elif isinstance(value, Mapping):
        _check_object(schema, value, path, errors, depth)
    _check_combinators(schema, value, path, errors, depth)


def _limit(schema: Mapping[str, Any], key: str) -> float | None:
    bound = schema.get(key)
    return bound if isinstance(bound, int | float) and not isinstance(bound, bool) else None


def _count(number: float, noun: str) -> str:
    return f"{number:g} {noun}" + ("" if number == 1 else "s")


def _check_string(schema: Mapping[str, Any], value: str, path: str, errors: list[ArgumentError]) -> None:
    if (low := _limit(schema, "minLength")) is not None and len(value) < low:
        errors.append(ArgumentError(path, f"must be at least {_count(low, 'character')} long"))
    if (high := _limit(schema, "maxLength")) is not None and len(value) > high:
        errors.append(ArgumentError(path, f"must be at most {_count(high, 'character')} long"))
    source = schema.get("pattern")
    compiled = _pattern(source) if isinstance(source, str) else None
    if compiled is not None and compiled.search(value) is None:
        errors.append(ArgumentError(path, f"must match the pattern {source}"))


def _check_number(schema: Mapping[str, Any], value: float, path: str, errors: list[ArgumentError]) -> None:
    exclusive_low, exclusive_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if (low := _limit(schema, "minimum")) is not None:
        if exclusive_low is True and value <= low:
            errors.append(ArgumentError(path, f"must be greater than {low:g}"))
        elif value < low:
            errors.append(ArgumentError(path, f"must be at least {low:g}"))
    if (high := _limit(schema, "maximum")) is not None:
        if exclusive_high is True and value >= high:
            errors.append(ArgumentError(path, f"must be less than {high:g}"))
        elif value > high:
            errors.append(ArgumentError(path, f"must be at most {high:g}"))
    if (low := _limit(schema, "exclusiveMinimum")) is not None and value <= low:
        errors.append(ArgumentError(path, f"must be greater than {low:g}"))
    if (high := _limit(schema, "exclusiveMaximum")) is not None and value >= high:
        errors.append(ArgumentError(path, f"must be less than {high:g}"))


def _check_array(schema: Mapping[str, Any], value: Sequence[Any], path: str, errors: list[ArgumentError],
                 depth: int) -> None:
    if (low := _limit(schema, "minItems")) is not None and len(value) < low:
        errors.append(ArgumentError(path, f"must have at least {_count(low, 'item')}"))
    if (high := _limit(schema, "maxItems")) is not None and len(value) > high:
        errors.append(ArgumentError(path, f"must have at most {_count(high, 'item')}"))
    items = schema.get("items")
    if isinstance(items, list):  # positional (draft 4-2019 tuple form)
        for index, (item_schema, item) in enumerate(zip(items, value, strict=False)):
            _validate(item_schema, item, f"{path}[{index}]", errors, depth + 1)
    elif items is not None:
        for index, item in enumerate(value):
            _validate(items, item, f"{path}[{index}]", errors, depth + 1)


def _check_object(schema: Mapping[str, Any], value: Mapping[str, Any], path: str, errors: list[ArgumentError],
                  depth: int) -> None:
    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        if isinstance(name, str) and name not in value:
            errors.append(ArgumentError(_child(path, name), "is required"))
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for name, property_schema in properties.items():
        if name in value:
            _validate(property_schema, value[name], _child(path, name), errors, depth + 1)
    extra = schema.get("additionalProperties")
    if extra is None or extra is True:
        return
    for name in value:
        if name not in properties:
            if extra is False:
                errors.append(ArgumentError(_child(path, str(name)), "is not a known property"))
            else:
                _validate(extra, value[name], _child(path, str(name)), errors, depth + 1)


def _check_combinators(schema: Mapping[str, Any], value: Any, path: str, errors: list[ArgumentError],
                       depth: int) -> None:
    every = schema.get("allOf")
    for branch in every if isinstance(every, list) else ():
        _validate(branch, value, path, errors, depth + 1)
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if not isinstance(branches, list) or not branches:
            continue
        results = [_branch_errors(branch, value, path, depth + 1) for branch in branches]
        passing = sum(not result for result in results)
        if passing == 0:
            first = results[0][0]
            errors.append(ArgumentError(path, f"matches none of the allowed forms (first: {first})"))
        elif keyword == "oneOf" and passing > 1:
            errors.append(ArgumentError(path, "matches more than one of the allowed forms"))


def _branch_errors(schema: Any, value: Any, path: str, depth: int) -> list[ArgumentError]:
    branch_errors: list[ArgumentError] = []
    _validate(schema, value, path, branch_errors, depth)
    return branch_errors


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

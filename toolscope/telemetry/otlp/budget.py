"""What an OTLP export request holds, counted before anything is built from it.

A protobuf body of 4.7 KB gzip can hold 2,400,000 empty spans: parsing it builds 220 MB of
protobuf messages, and turning those into Python objects took a web worker past 1 GB. So the
request is counted first, on the wire, with nothing allocated per element: the items (spans, log
records) and the values inside them (attributes, span events and links, array and key-value list
entries, at any depth). The count stops as soon as it passes a limit, so counting costs at most
the limit's worth of steps, and a request over either limit is refused (413) before it is parsed.

Within the limits, what the request builds is bounded by them, whatever the body's size: at most
`items` spans and `values` values, each a few hundred bytes as Python objects.

OTLP/JSON is counted on the parsed JSON (its size is bounded by the body limit and the JSON
parser's own nesting limit), before the protobuf mapping, which is the slow and large part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

# Nesting of AnyValue arrays and key-value lists inside one another; protobuf's own parser stops
# at 100 levels of messages.
MAX_DEPTH = 32
_LEN = 2


class OverBudget(Exception):
    """The request holds more items or values than one request may."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"The request holds more than {limit:,} {what}; the limit is {limit:,} per request.")
        self.what = what
        self.limit = limit


class Malformed(ValueError):
    """The protobuf body is not well-formed wire format."""


@dataclass(frozen=True)
class Budget:
    items: int  # spans or log records
    values: int  # attributes, events, links, array and key-value list entries
    item_name: str = "spans"


@dataclass
class _Count:
    budget: Budget
    items: int = 0
    values: int = 0

    def item(self) -> None:
        self.items += 1
        if self.items > self.budget.items:
            raise OverBudget(self.budget.item_name, self.budget.items)

    def value(self) -> None:
        self.values += 1
        if self.values > self.budget.values:
            raise OverBudget("attributes, events, links and values", self.budget.values)


# field number -> (the field's message plan, what an entry counts as) for the message-typed fields
# of a message; other fields are skipped by their wire type. A message type nested in itself
# (AnyValue -> ArrayValue -> AnyValue) shares its plan.
_Plan = dict[int, tuple["_Plan", int]]
_NOTHING, _ITEM, _VALUE = 0, 1, 2
_PLANS: dict[tuple[str, str], _Plan] = {}


def _plan(descriptor: Descriptor, item: str) -> _Plan:
    key = (descriptor.full_name, item)
    if key in _PLANS:
        return _PLANS[key]
    plan: _Plan = {}
    _PLANS[key] = plan
    for field in descriptor.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            child = field.message_type
            counts = (_ITEM if child.name == item
                      else _VALUE if field.is_repeated else _NOTHING)
            plan[field.number] = (_plan(child, item), counts)
    return plan


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        try:
            byte = buf[pos]
        except IndexError:
            raise Malformed("truncated varint") from None
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Malformed("varint longer than 10 bytes")


def _walk(buf: bytes, pos: int, end: int, plan: _Plan, count: _Count, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Malformed(f"values nested deeper than {MAX_DEPTH} levels")
    while pos < end:
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == _LEN:
            length = buf[pos] if pos < end else 0x80
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos)
            child = plan.get(tag >> 3)
            if child is not None:
                child_plan, counts = child
                if counts == _ITEM:
                    count.item()
                elif counts == _VALUE:
                    count.value()
                if child_plan:
                    _walk(buf, pos, min(pos + length, end), child_plan, count, depth + 1)
            pos += length
        elif wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:  # groups (3, 4) are not in any OTLP message; 6 and 7 do not exist
            raise Malformed(f"wire type {wire}")
    if pos > end:
        raise Malformed("a field runs past the end of its message")


def count_protobuf(body: bytes, request: Any, budget: Budget, item: str) -> None:
    """Raise OverBudget if the serialized `request` type in `body` holds more than `budget` of
    messages named `item` (Span, LogRecord) or of other messages; Malformed if it cannot be read."""
    _walk(body, 0, len(body), _plan(request.DESCRIPTOR, item), _Count(budget), 0)


_VALUE_LISTS = ("attributes", "events", "links", "values")


def count_json(data: dict[str, Any], path: tuple[str, str, str], budget: Budget) -> None:
    """The same count on OTLP/JSON already parsed: `path` names the resource, scope and item lists
    (camelCase or the protobuf field names); every entry of a list inside an item or a resource
    counts as a value. Malformed names the first list that is not a list of objects."""
    count = _Count(budget)
    resources, scopes, items = path
    for r, resource in enumerate(_objects(data, resources, resources)):
        _values(resource.get("resource"), count, 0)
        for s, scope in enumerate(_objects(resource, scopes, f"{resources}[{r}].{scopes}")):
            for item in _objects(scope, items, f"{resources}[{r}].{scopes}[{s}].{items}"):
                count.item()
                _values(item, count, 0)


def _objects(node: dict[str, Any], name: str, where: str) -> list[dict[str, Any]]:
    found = node.get(name, node.get(_snake(name)))
    if found is None:
        return []
    if not isinstance(found, list):
        raise Malformed(f"{where} must be a list, not {_json_type(found)}")
    for i, entry in enumerate(found):
        if not isinstance(entry, dict):
            raise Malformed(f"{where}[{i}] must be an object, not {_json_type(entry)}")
    return found


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


# A JSON string, escapes included (the unrolled form: linear, no backtracking).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def count_json_containers(body: bytes, budget: Budget) -> None:
    """Before parsing: OverBudget if `body` holds more JSON objects and arrays (outside strings)
    than twice the budget's items and values (an attribute is two objects in OTLP/JSON), which
    parsed would take more memory than the request may (an empty object takes 3 bytes of the body
    and ~100 bytes parsed)."""
    limit = 2 * (budget.items + budget.values)
    if json_containers_over(body, limit):
        raise OverBudget("JSON objects and arrays", limit)


def json_containers_over(body: bytes, limit: int) -> bool:
    """Whether the JSON `body` holds more than `limit` objects and arrays outside strings (a body
    that is not JSON gets an answer too, and fails to parse later). The braces of the whole body
    are counted first, at memory speed; strings are cut out (~8 ms a MB) only when those are over."""
    if body.count(b"{") + body.count(b"[") <= limit:
        return False
    outside_strings = _JSON_STRING.sub(b"", body)
    return outside_strings.count(b"{") + outside_strings.count(b"[") > limit


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _values(node: Any, count: _Count, depth: int) -> None:
    """Every entry of every list under `node` is a value."""
    if depth > MAX_DEPTH:
        raise OverBudget(f"levels of nesting (at most {MAX_DEPTH})", MAX_DEPTH)
    if isinstance(node, dict):
        for child in node.values():
            if isinstance(child, dict | list):
                _values(child, count, depth + 1)
    elif isinstance(node, list):
        for child in node:
            count.value()
            if isinstance(child, dict | list):
                _values(child, count, depth + 1)

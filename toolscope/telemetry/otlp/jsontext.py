"""JSON inside attributes (messages, tool definitions, arguments, schemas), read within limits.

Exporters put JSON text in string attributes; anyone can put anything there. Python's parser
raises RecursionError past ~1,000 levels, and what is read is walked again (copied, hashed,
written back) by code that recurses too. So text nested deeper than MAX_DEPTH is unreadable, as is
text that is not JSON, or not text: the caller keeps it as text or leaves the attribute out, and
the event validation rejects what it holds to less (free JSON in an event: 64 levels).
"""

from __future__ import annotations

import json
from typing import Any

from toolscope.telemetry.otlp.budget import json_containers_over

MAX_DEPTH = 100
# Objects and arrays one attribute's JSON may hold (3,000 tool definitions hold ~60,000): parsed,
# each is ~60 bytes or more, and an attribute can be the whole 5 MB body.
MAX_CONTAINERS = 200_000


class Unreadable(ValueError):
    """The attribute holds no JSON that can be read within the limits."""


def read_json(text: Any) -> Any:
    """The JSON value `text` holds; Unreadable if it is not a string, not JSON (numbers longer
    than Python reads included), nested deeper than MAX_DEPTH or holding more than MAX_CONTAINERS
    objects and arrays (counted before parsing)."""
    if not isinstance(text, str):
        raise Unreadable(f"expected JSON text, got {type(text).__name__}")
    if len(text) > MAX_CONTAINERS and json_containers_over(text.encode(), MAX_CONTAINERS):
        raise Unreadable(f"holds more than {MAX_CONTAINERS:,} objects and arrays")
    try:
        value = json.loads(text)
    except RecursionError:
        raise Unreadable(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise Unreadable(str(exc)) from None
    if _deeper_than(value, MAX_DEPTH):
        raise Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False

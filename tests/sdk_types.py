"""Checking our fixtures and renderings against the official SDKs' own types (pydantic validates
their TypedDicts), losing nothing on the way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import TypeAdapter


def materialized(value: Any) -> Any:
    """A validated value with pydantic's lazy iterators (the SDKs' `Iterable[...]` fields) read,
    which also validates their items."""
    if isinstance(value, Iterator):  # pydantic_core.ValidatorIterator
        return [materialized(item) for item in value]
    if isinstance(value, dict):
        return {key: materialized(item) for key, item in value.items()}
    if isinstance(value, list):
        return [materialized(item) for item in value]
    return value


def validated(kind: Any, value: list[Any]) -> Any:
    """`value` validated as a list of the SDK's `kind`, its lazy iterables read: equal to `value`
    when it conforms and the type has every key it has."""
    adapter = TypeAdapter(list[kind])  # held while the lazy iterators are read: they need its validator
    return materialized(adapter.validate_python(value))

"""What changed between two policy documents, as lines an operator reads before publishing.

    selection.mode: all → context_rules
    selection.always_on: + git_diff, - web_fetch
    selection.context_rules[testing].keywords: + spec
    outputs.compaction: added bash* {"max_tokens": 2000, "strategy": "head_tail"}
    tools.bash.requires_approval: false → true
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from toolscope.policies.models import PolicyVersion

# Fields every version has its own value of; a diff of them says nothing about behaviour.
META_KEYS = frozenset({"label", "version", "etag", "published_at"})
# How items of a list of objects are told apart: context rules by name, compaction rules by glob.
RECORD_KEYS = ("name", "tools")
FIRST_VERSION = "first version: nothing to compare with"


def policy_version_diff(*, old: PolicyVersion | None, new: PolicyVersion) -> list[str]:
    """The changes from `old` to `new`; a single line saying so when there is no `old`."""
    if old is None:
        return [FIRST_VERSION]
    return document_diff(old=old.document, new=new.document)


def document_diff(*, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One readable line per changed leaf, list or rule, with the dotted path of the change."""
    old = {key: value for key, value in old.items() if key not in META_KEYS}
    new = {key: value for key, value in new.items() if key not in META_KEYS}
    return list(_changes("", old, new))


def _changes(path: str, old: Any, new: Any) -> Iterator[str]:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        yield from _dict_changes(path, old, new)
    elif _is_names(old) and _is_names(new):
        yield f"{path}: {_names_change(old, new)}"
    elif _is_records(old) and _is_records(new) and (key := _record_key(old, new)):
        yield from _record_changes(path, key, old, new)
    elif _is_records(old) and _is_records(new) and len(old) == len(new):
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            yield from _changes(f"{path}[{index}]", before, after)
    else:
        yield f"{path}: {_show(path, old)} → {_show(path, new)}"


def _dict_changes(path: str, old: dict[str, Any], new: dict[str, Any]) -> Iterator[str]:
    for key in [*new, *(key for key in old if key not in new)]:
        child = f"{path}.{key}" if path else str(key)
        if key not in old:
            yield f"{child}: added {_show(child, new[key])}"
        elif key not in new:
            yield f"{child}: removed (was {_show(child, old[key])})"
        else:
            yield from _changes(child, old[key], new[key])


def _names_change(old: list[Any], new: list[Any]) -> str:
    parts = [f"+ {item}" for item in new if item not in old] + [f"- {item}" for item in old if item not in new]
    return ", ".join(parts) if parts else f"order {_show('', old)} → {_show('', new)}"


def _record_changes(path: str, key: str, old: list[dict], new: list[dict]) -> Iterator[str]:
    before = {record[key]: record for record in old}
    after = {record[key]: record for record in new}
    for name, record in after.items():
        child = f"{path}[{name}]"
        if name not in before:
            rest = {k: v for k, v in record.items() if k != key}
            yield f"{path}: added {name} {_show(child, rest)}"
        else:
            yield from _changes(child, before[name], record)
    for name in before:
        if name not in after:
            yield f"{path}: removed {name}"
    kept_before = [name for name in before if name in after]
    kept_after = [name for name in after if name in before]
    if kept_before != kept_after:
        yield f"{path}: order {', '.join(map(str, kept_before))} → {', '.join(map(str, kept_after))}"


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(item, dict | list) for item in value)


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _record_key(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str | None:
    """The field that names each record, if every record has one and no side repeats a name."""
    for key in RECORD_KEYS:
        if all(_names_each(records, key) for records in (old, new)):
            return key
    return None


def _names_each(records: list[dict[str, Any]], key: str) -> bool:
    names = [record.get(key) for record in records]
    return all(isinstance(name, str) for name in names) and len(set(names)) == len(names)


def _show(path: str, value: Any) -> str:
    if value is None and path.endswith("allowed"):
        return "every catalog tool"
    if isinstance(value, str):
        return value
    if _is_names(value):
        return f"[{', '.join(map(str, value))}]"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)

"""A project's tool catalog: identifying a tool's schema however a client serialised it."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from toolscope_agent.engine.schemas import normalize_tool, schema_hash

from toolscope.policies.models import Policy, Tool, ToolGroup, ToolVersion
from toolscope.policies.selectors import SETTINGS_FIELDS
from toolscope.telemetry.models import Project
from toolscope.telemetry.services.redact import hash_key, tool_definition_redact
from toolscope.tokenizer import schema_tokens


def tool_schema_hash(*, name: str, description: str, input_schema: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of {name, description, input_schema}.

    Delegates to the agent engine so the server and every agent hash a definition byte for byte
    alike (sorted keys, no whitespace, UTF-8); a hash computed twice differently would make every
    turn look like a schema change.
    """
    return schema_hash(name, description, input_schema)


Key = tuple[str, str]  # (source, name): what identifies a tool of the catalog


def _normalized(definitions: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Definitions by (source, name), in toolscope's shape with their hash; the last one of a key
    wins. Secret literals are cut out first (PUT /tools stores definitions as sent), so the hash is
    the stored definition's."""
    by_key: dict[Key, dict[str, Any]] = {}
    key = hash_key()
    for definition in definitions:
        tool = tool_definition_redact(normalize_tool(definition), key=key)
        tool["schema_hash"] = schema_hash(tool["name"], tool["description"], tool["input_schema"])
        by_key[(tool["source"], tool["name"])] = tool
    return by_key


def _priced(by_key: dict[Key, dict[str, Any]], encoding: str) -> dict[Key, dict[str, Any]]:
    """Each definition with the tokens it costs in a request's tools array (cached by hash)."""
    for d in by_key.values():
        d["schema_tokens"] = schema_tokens(
            name=d["name"], description=d["description"], input_schema=d["input_schema"],
            schema_hash=d["schema_hash"], encoding=encoding,
        )
    return by_key


def _sourceless_matched(by_key: dict[Key, dict[str, Any]], rows: list[Tool]) -> dict[Key, dict[str, Any]]:
    """A definition sent without a source that is byte for byte a known tool's current schema is
    that tool (transcripts and agents that send no source advertise the same tools an agent
    registered with one); otherwise it is the tool of source "". The most recently seen wins."""
    current = {(tool.name, tool.schema_hash): (tool.source, tool.name)
               for tool in sorted(rows, key=lambda tool: tool.last_seen_at)}
    sourceless = {(tool.name, tool.schema_hash) for tool in rows if not tool.source}
    matched: dict[Key, dict[str, Any]] = {}
    for (source, name), d in by_key.items():
        key = (source, name)
        if not source and (name, d["schema_hash"]) not in sourceless:
            key = current.get((name, d["schema_hash"]), key)
        matched[key] = {**d, "source": key[0]}
    return matched


@transaction.atomic
def catalog_upsert(*, project: Project, definitions: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Insert new tools, update changed definitions, keep every schema in ToolVersion.

    A tool is its (source, name): a definition only ever changes its own source's tool, and a
    source's first definition of a name another source already has becomes a tool of its own,
    joining the other's policy sets and settings (policies refer to tools by name). Per-tool
    settings belong to operators and are never changed by a definition. Six queries, whatever the
    number of tools (plus a few when a new source joins a known name).
    Returns {"name", "source", "schema_hash", "status": created|updated|unchanged} per tool.
    """
    by_key = _priced(_normalized(definitions), project.encoding)
    names = {name for _, name in by_key}
    rows = list(Tool.objects.filter(project=project, name__in=names))
    by_key = _sourceless_matched(by_key, rows)
    existing = {(tool.source, tool.name): tool for tool in rows}
    now = timezone.now()
    created, updated, results = [], [], []
    for key, d in by_key.items():
        tool = existing.get(key)
        if tool is None:
            created.append(_tool_new(project, d, now, sibling=_eldest(rows, d["name"])))
            status = "created"
        elif tool.schema_hash != d["schema_hash"]:
            tool.description, tool.input_schema = d["description"], d["input_schema"]
            tool.schema_hash, tool.schema_tokens = d["schema_hash"], d["schema_tokens"]
            updated.append(tool)
            status = "updated"
        else:
            status = "unchanged"
        results.append({"name": d["name"], "source": d["source"], "schema_hash": d["schema_hash"], "status": status})
    Tool.objects.bulk_create(created, ignore_conflicts=True)
    Tool.objects.bulk_update(updated, ["description", "input_schema", "schema_hash", "schema_tokens"])
    ids = _tool_ids(project, names, by_key)
    Tool.objects.filter(pk__in=ids.values()).update(last_seen_at=now)
    _versions_record(ids, by_key)
    joined = [(ids[(t.source, t.name)], sibling.pk) for t in created
              if (sibling := _eldest(rows, t.name)) is not None and (t.source, t.name) in ids]
    if joined:
        _policy_sets_join(joined)
    return results


def _eldest(rows: list[Tool], name: str) -> Tool | None:
    """The first-registered tool of `name`: a new source's tool takes its settings and sets."""
    same = [tool for tool in rows if tool.name == name]
    return min(same, key=lambda tool: (tool.first_seen_at, tool.pk)) if same else None


def _tool_new(project: Project, d: dict[str, Any], now: Any, *, sibling: Tool | None) -> Tool:
    settings = {field: getattr(sibling, field) for field in SETTINGS_FIELDS} if sibling else {}
    return Tool(project=project, name=d["name"], description=d["description"], input_schema=d["input_schema"],
                source=d["source"], schema_hash=d["schema_hash"], schema_tokens=d["schema_tokens"],
                last_seen_at=now, **settings)


def _tool_ids(project: Project, names: set[str], by_key: dict[Key, dict[str, Any]]) -> dict[Key, int]:
    rows = Tool.objects.filter(project=project, name__in=names).values_list("source", "name", "pk")
    return {(source, name): pk for source, name, pk in rows if (source, name) in by_key}


def _versions_record(ids: dict[Key, int], by_key: dict[Key, dict[str, Any]]) -> None:
    ToolVersion.objects.bulk_create(
        [
            ToolVersion(tool_id=ids[key], schema_hash=d["schema_hash"], description=d["description"],
                        input_schema=d["input_schema"], schema_tokens=d["schema_tokens"])
            for key, d in by_key.items() if key in ids
        ],
        ignore_conflicts=True,
    )


# The policy's references to tools: a tool joining a name joins each set its eldest sibling is in.
_POLICY_SETS = ((Policy.allowed.through, "policy_id"), (Policy.always_on.through, "policy_id"),
                (ToolGroup.tools.through, "toolgroup_id"))


def _policy_sets_join(joined: list[tuple[int, int]]) -> None:
    """Add each new tool (new_id, sibling_id) to the policy sets and groups its sibling is in, so
    the draft keeps naming the tool whichever of its sources' rows an operator later removes.
    Rare (a new source for a known name), so a query pair per kind of set is fine."""
    new_of: dict[int, list[int]] = {}
    for new, sibling in joined:
        new_of.setdefault(sibling, []).append(new)
    for through, owner in _POLICY_SETS:
        links = through.objects.filter(tool_id__in=new_of).values_list(owner, "tool_id")
        through.objects.bulk_create(
            [through(**{owner: owner_id, "tool_id": new}) for owner_id, tool_id in links for new in new_of[tool_id]],
            ignore_conflicts=True,
        )


def tool_settings_share(*, tool: Tool) -> int:
    """Give the other sources' tools of `tool`'s name its per-tool settings: the policy document
    serves settings by name, so the rows of one name must agree. Returns how many rows changed."""
    values = {field: getattr(tool, field) for field in SETTINGS_FIELDS}
    return Tool.objects.filter(project_id=tool.project_id, name=tool.name).exclude(pk=tool.pk).update(**values)

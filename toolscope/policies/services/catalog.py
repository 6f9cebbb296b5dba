"""A project's tool catalog: identifying a tool's schema however a client serialised it."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from toolscope_agent.engine.schemas import normalize_tool, schema_hash

from toolscope.policies.models import Policy, Tool, ToolGroup, ToolVersion
from toolscope.policies.selectors import SETTINGS_FIELDS
from toolscope.policies.services.embeddings import tool_embeddings_soon
from toolscope.telemetry.models import Project
from toolscope.telemetry.services.bulk import rows_update
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
    settings belong to operators and are never changed by a definition.

    Set-based, whatever the number of tools (issue 24, item 6: 3,000 definitions of one OTLP turn
    spent over 120 s here, in an UPDATE of CASE WHEN branches per row and per column): one query
    reads the known tools (without their schemas), then at most one statement each inserts the new
    ones, updates the changed ones (from arrays), marks the unchanged ones seen, and records the
    versions not recorded yet (copied inside PostgreSQL from the tools, so an unchanged catalog
    sends no schema back); three more when a new source joins a known name. An unchanged catalog
    costs three queries.
    Returns {"name", "source", "schema_hash", "status": created|updated|unchanged} per tool.
    """
    by_key = _priced(_normalized(definitions), project.encoding)
    names = {name for _, name in by_key}
    rows = list(Tool.objects.filter(project=project, name__in=names).only(*_KNOWN_FIELDS))
    by_key = _sourceless_matched(by_key, rows)
    existing = {(tool.source, tool.name): tool for tool in rows}
    eldest = _eldest_by_name(rows)
    now = timezone.now()
    created, updated, unchanged, results = [], [], [], []
    for key, d in by_key.items():
        tool = existing.get(key)
        if tool is None:
            created.append(_tool_new(project, d, now, sibling=eldest.get(d["name"])))
            status = "created"
        elif tool.schema_hash != d["schema_hash"]:
            updated.append((tool.pk, d))
            status = "updated"
        else:
            unchanged.append(tool.pk)
            status = "unchanged"
        results.append({"name": d["name"], "source": d["source"], "schema_hash": d["schema_hash"], "status": status})
    ids = {key: tool.pk for key, tool in existing.items() if key in by_key}
    ids.update(_tools_insert(project, created))
    # The changed definitions in one UPDATE joined to arrays of their values (bulk.rows_update).
    rows_update(Tool, _CHANGED_FIELDS, [
        Tool(pk=pk, description=d["description"], input_schema=d["input_schema"], schema_hash=d["schema_hash"],
             schema_tokens=d["schema_tokens"], last_seen_at=now) for pk, d in updated])
    if unchanged:
        Tool.objects.filter(pk__in=unchanged).update(last_seen_at=now)
    _versions_record(ids, by_key, now)
    joined = [(ids[(t.source, t.name)], sibling.pk) for t in created
              if (sibling := eldest.get(t.name)) is not None and (t.source, t.name) in ids]
    if joined:
        _policy_sets_join(joined)
    if created or updated:  # new texts for tool_search's semantic side: embedded once, by a worker
        tool_embeddings_soon(project_id=project.pk)
    return results


_CHANGED_FIELDS = ("description", "input_schema", "schema_hash", "schema_tokens", "last_seen_at")
# What the upsert reads of the known tools: never their schemas (a 3 MB catalog would come back).
_KNOWN_FIELDS = ("pk", "project_id", "name", "source", "schema_hash", "first_seen_at", "last_seen_at",
                 *SETTINGS_FIELDS)


def _eldest_by_name(rows: list[Tool]) -> dict[str, Tool]:
    """The first-registered tool of each name: a new source's tool takes its settings and sets."""
    eldest: dict[str, Tool] = {}
    for tool in sorted(rows, key=lambda tool: (tool.first_seen_at, tool.pk), reverse=True):
        eldest[tool.name] = tool
    return eldest


def _tool_new(project: Project, d: dict[str, Any], now: Any, *, sibling: Tool | None) -> Tool:
    settings = {field: getattr(sibling, field) for field in SETTINGS_FIELDS} if sibling else {}
    return Tool(project=project, name=d["name"], description=d["description"], input_schema=d["input_schema"],
                source=d["source"], schema_hash=d["schema_hash"], schema_tokens=d["schema_tokens"],
                last_seen_at=now, **settings)


def _tools_insert(project: Project, created: list[Tool]) -> dict[Key, int]:
    """Insert the new tools in one statement; their ids by (source, name). One a concurrent
    upsert inserted meanwhile is left as that upsert wrote it, and its id read back."""
    if not created:
        return {}
    Tool.objects.bulk_create(created, ignore_conflicts=connection.vendor != "postgresql",
                             **({"update_conflicts": True, "unique_fields": ["project", "name", "source"],
                                 "update_fields": ["last_seen_at"]} if connection.vendor == "postgresql" else {}))
    ids = {(tool.source, tool.name): tool.pk for tool in created if tool.pk is not None}
    missing = [tool for tool in created if tool.pk is None]
    if missing:
        rows = Tool.objects.filter(project=project, name__in={tool.name for tool in missing})
        wanted = {(tool.source, tool.name) for tool in missing}
        ids.update({(source, name): pk for source, name, pk in rows.values_list("source", "name", "pk")
                    if (source, name) in wanted})
    return ids


def _versions_record(ids: dict[Key, int], by_key: dict[Key, dict[str, Any]], now: Any) -> None:
    """A ToolVersion for each of these tools' current schema that has none yet. On PostgreSQL it
    is copied from the tool rows inside the database, so an unchanged catalog sends no schema."""
    if not ids:
        return
    if connection.vendor != "postgresql":
        ToolVersion.objects.bulk_create(
            [ToolVersion(tool_id=ids[key], schema_hash=d["schema_hash"], description=d["description"],
                         input_schema=d["input_schema"], schema_tokens=d["schema_tokens"])
             for key, d in by_key.items() if key in ids],
            ignore_conflicts=True,
        )
        return
    tools, versions = Tool._meta.db_table, ToolVersion._meta.db_table
    with connection.cursor() as cursor:
        # Table names come from the models' metadata, never from input; values are parameters.
        cursor.execute(
            f"""INSERT INTO "{versions}" (tool_id, schema_hash, description, input_schema, schema_tokens, first_seen_at)
                SELECT t.id, t.schema_hash, t.description, t.input_schema, t.schema_tokens, %s
                FROM "{tools}" AS t
                WHERE t.id = ANY(%s) AND NOT EXISTS (
                    SELECT 1 FROM "{versions}" AS v WHERE v.tool_id = t.id AND v.schema_hash = t.schema_hash)
                ON CONFLICT DO NOTHING""",  # noqa: S608
            [now, list(ids.values())],
        )


# The policy's references to tools: a tool joining a name joins each set its eldest sibling is in.
_POLICY_SETS = ((Policy.allowed.through, "policy_id"), (Policy.always_on.through, "policy_id"),
                (ToolGroup.tools.through, "toolgroup_id"))


def _policy_sets_join(joined: list[tuple[int, int]]) -> None:
    """Add each new tool (new_id, sibling_id) to the policy sets and groups its sibling is in, so
    the draft keeps naming the tool whichever of its sources' rows an operator later removes:
    one INSERT ... SELECT per kind of set on PostgreSQL, a query pair elsewhere."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for through, owner in _POLICY_SETS:
                column = through._meta.get_field(owner).column
                table = through._meta.db_table  # model metadata, never input
                cursor.execute(
                    f"""INSERT INTO "{table}" ("{column}", tool_id)
                        SELECT link."{column}", pair.new FROM "{table}" AS link
                        JOIN unnest(%s::bigint[], %s::bigint[]) AS pair(new, sibling) ON link.tool_id = pair.sibling
                        ON CONFLICT DO NOTHING""",  # noqa: S608
                    [[new for new, _ in joined], [sibling for _, sibling in joined]],
                )
        return
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
